package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
)

// collectLock is the file in an eval directory a collecting process holds
// (flock): one process of a home appends to results.jsonl at a time.
const collectLock = "collect.lock"

// PublishEval stores the plan (KV apodex-evals, key = eval id), so any
// host with the URL can follow the eval, and each of its worlds.
func (c *Conn) PublishEval(ctx context.Context, home string, plan *eval.Plan) error {
	raw, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	if _, err := c.evals.Put(ctx, plan.ID, raw); err != nil {
		return fmt.Errorf("jetstream: store the plan of %s: %w", plan.ID, err)
	}
	return c.PublishWorlds(ctx, home, plan)
}

// FetchPlan makes eval id's plan present in home (from KV apodex-evals
// unless home has it) and returns it.
func (c *Conn) FetchPlan(ctx context.Context, home, id string) (*eval.Plan, error) {
	if p, err := eval.ReadPlan(home, id); err == nil {
		return p, nil
	}
	e, err := c.evals.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, fmt.Errorf("jetstream: no eval %s on %s (see `apodex eval show ID` on the host that started it)", id, c.URL)
	} else if err != nil {
		return nil, fmt.Errorf("jetstream: read the plan of %s: %w", id, err)
	}
	p := &eval.Plan{}
	if err := json.Unmarshal(e.Value(), p); err != nil || p.ID != id {
		return nil, fmt.Errorf("jetstream: the stored plan of %s is damaged", id)
	}
	dir := eval.Dir(home, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, eval.PlanFile+".part")
	if err := os.WriteFile(tmp, e.Value(), 0o644); err != nil {
		return nil, err
	}
	return p, os.Rename(tmp, filepath.Join(dir, eval.PlanFile))
}

// CollectEval appends plan's results to results.jsonl in opts.Home, as
// Collect does, once it holds the eval directory's collect lock: a
// second collector of the same home (eval --wait and export --follow)
// waits, then starts from what the first wrote, so no line is written
// twice. It returns how many of the plan's rollouts have a line.
func (c *Conn) CollectEval(ctx context.Context, opts eval.Options, plan *eval.Plan) (int, error) {
	return c.collectEval(ctx, opts, plan, false)
}

// CollectNow is CollectEval up to what the queue holds now, result lines
// only (eval show from another host fetches what it shows): it does not
// wait for the rollouts still running, nor for another collector of the
// home, and fetches no record (CollectEval fetches those of the lines it
// finds).
func (c *Conn) CollectNow(ctx context.Context, opts eval.Options, plan *eval.Plan) (int, error) {
	return c.collectEval(ctx, opts, plan, true)
}

func (c *Conn) collectEval(ctx context.Context, opts eval.Options, plan *eval.Plan, now bool) (int, error) {
	unlock, err := lockCollect(ctx, eval.Dir(opts.Home, plan.ID), !now)
	if errors.Is(err, errBusy) { // another process of this home is collecting
		done, _ := eval.ReadResults(opts.Home, plan.ID)
		return len(done), nil
	}
	if err != nil {
		done, _ := eval.ReadResults(opts.Home, plan.ID)
		return len(done), err
	}
	defer unlock()
	col, err := eval.OpenCollector(opts, plan)
	if err != nil {
		return 0, err
	}
	defer col.Close()
	err = c.collect(ctx, opts.Home, plan, col, now)
	return col.Done(), err
}

// errBusy: another process holds the collect lock.
var errBusy = errors.New("jetstream: another process collects this eval")

// lockCollect takes dir's collect lock, trying every 200ms until ctx ends
// (with wait; else errBusy at once).
func lockCollect(ctx context.Context, dir string, wait bool) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, collectLock), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return func() { f.Close() }, nil
		}
		if !wait {
			f.Close()
			return nil, errBusy
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
