package eval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/apodex/apodex/internal/world"
)

// Job is one rollout of a plan, whole enough to run anywhere the world is
// stored: what a queue carries (apodex eval --nats).
type Job struct {
	Eval        string    `json:"eval"`
	World       PlanWorld `json:"world"`
	Config      Config    `json:"config"`
	Rollout     int       `json:"rollout"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
	Version     string    `json:"version"` // the Apodex version of the eval
}

// Key names the rollout within its eval: world/config/rollout.
func (j Job) Key() string { return j.World.ID + "/" + j.Config.Name + "/" + strconv.Itoa(j.Rollout) }

// Key names a result's rollout as Job.Key does.
func (r Result) Key() string { return r.World + "/" + r.Config + "/" + strconv.Itoa(r.Rollout) }

// Pending lists the plan's rollouts that have no result in done, in plan
// order.
func Pending(plan *Plan, done []Result, version string) []Job {
	have := map[string]bool{}
	for _, r := range done {
		have[r.Key()] = true
	}
	var out []Job
	for _, w := range plan.Worlds {
		for _, c := range plan.Configs {
			for i := 0; i < plan.Rollouts; i++ {
				j := Job{Eval: plan.ID, World: w, Config: c, Rollout: i, MaxAttempts: plan.MaxAttempts, Version: version}
				if !have[j.Key()] {
					out = append(out, j)
				}
			}
		}
	}
	return out
}

// RunOne runs job in this process, as a local eval runs each rollout, and
// scores it. onStart (may be nil) hears the run id before the run starts.
// The job's world must be in opts.Home's store.
func RunOne(ctx context.Context, job Job, opts Options, onStart func(runID string)) Result {
	opts = opts.withDefaults()
	r := &roller{opts: opts, store: world.NewStore(opts.Home), onStart: onStart}
	return r.rollout(ctx, job.World, job.Config, job.Rollout)
}

// Collector appends results that arrive from elsewhere to an eval's
// results.jsonl: at most one line per rollout (the first wins; a later one
// for the same rollout is dropped and reported as not added), each synced
// as it arrives, with the same progress lines as a local eval.
type Collector struct {
	sink *sink
	have map[string]bool
}

// OpenCollector opens eval plan's results.jsonl for appending, after
// dropping a torn last line. Close it when done.
func OpenCollector(opts Options, plan *Plan) (*Collector, error) {
	opts = opts.withDefaults()
	path := filepath.Join(Dir(opts.Home, plan.ID), ResultsFile)
	if err := dropTornTail(path); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	done, err := ReadResults(opts.Home, plan.ID)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	c := &Collector{have: map[string]bool{}, sink: &sink{f: f, done: len(done), base: len(done), total: plan.Total(),
		begin: opts.Clock.Now(), progress: opts.Progress, id: plan.ID, now: opts.Clock.Now}}
	for _, r := range done {
		c.have[r.Key()] = true
		if r.Correct == 1 {
			c.sink.passed++
		}
	}
	return c, nil
}

// Add appends r unless its rollout already has a line; it reports whether
// it did.
func (c *Collector) Add(r Result) (bool, error) {
	if c.have[r.Key()] {
		return false, nil
	}
	if err := c.sink.add(r); err != nil {
		return false, fmt.Errorf("eval: write results: %w", err)
	}
	c.have[r.Key()] = true
	return true, nil
}

// Done is the number of rollouts with a result line; Total the plan's.
func (c *Collector) Done() int  { return len(c.have) }
func (c *Collector) Total() int { return c.sink.total }

// Close closes results.jsonl.
func (c *Collector) Close() error { return c.sink.f.Close() }
