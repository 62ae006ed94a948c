// Package eval runs suites of world rollouts and scores them (SPEC
// R-EVAL-1, R-EVAL-2, R-DATA-4): every world × configuration × rollout
// index is one rollout (a run of internal/run on a stored world), scored as
// a vector from its record.
//
// Guarantees:
//   - an eval lives in <home>/evals/<eval-id>/: plan.json (the resolved
//     world ids, configurations and rollouts, written before any rollout
//     starts), started.jsonl and results.jsonl;
//   - each finished rollout's line is appended to results.jsonl, and
//     synced, as soon as it finishes, under a lock, whatever the others are
//     doing: a slow rollout never holds back finished ones, and a line is
//     never interleaved with another;
//   - at most Parallel rollouts run at once; each rollout runs in this
//     process from start to end on its own fresh overlay sandbox;
//   - Resume runs exactly the rollouts that have no line in results.jsonl
//     (a torn last line, from a kill, does not count and is dropped), so a
//     finished rollout is never run twice; overlays a killed rollout left
//     mounted are removed first;
//   - scores come from one function over the run's record (scoreRun).
package eval

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/worktree"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// Files of an eval directory.
const (
	PlanFile    = "plan.json"
	ResultsFile = "results.jsonl"
	startedFile = "started.jsonl"
)

// Options configure Start and Resume. Flags are parsed elsewhere.
type Options struct {
	Home     string
	Parallel int    // rollouts at once; 0: the number of cores
	Sandbox  string // bwrap (default) or none
	// Progress receives one line per finished rollout; nil for none.
	Progress io.Writer
	// NewModel builds the model of a configuration for a rollout of w.
	NewModel func(c Config, w *world.World) (llm.Model, record.ModelSettings, error)
	// Clock is the eval's time and its rollouts': ids, the plan's and the
	// results' times, the runs; nil is the system clock.
	Clock clock.Clock
}

// Plan is an eval as resolved when it started.
type Plan struct {
	ID       string      `json:"id"`
	Suite    string      `json:"suite"`
	Worlds   []PlanWorld `json:"worlds"`
	Configs  []Config    `json:"configs"`
	Rollouts int         `json:"rollouts"`
	// MaxAttempts bounds the tries of a rollout that fails to run (queued
	// evals only); 0 is the default, 2.
	MaxAttempts int       `json:"max_attempts,omitempty"`
	Created     time.Time `json:"created"`
}

// PlanWorld is one stored world of the plan.
type PlanWorld struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Family string `json:"family"`
	Level  int    `json:"level,omitempty"`
}

// Total is the number of rollouts the plan asks for.
func (p *Plan) Total() int { return len(p.Worlds) * len(p.Configs) * p.Rollouts }

// Result is one line of results.jsonl.
type Result struct {
	World       string `json:"world"`
	WorldName   string `json:"world_name"`
	Family      string `json:"family"`
	Level       int    `json:"level,omitempty"`
	Config      string `json:"config"`
	Rollout     int    `json:"rollout"`
	RunID       string `json:"run_id,omitempty"`
	Status      string `json:"status"`
	Termination string `json:"termination_reason,omitempty"`
	Error       string `json:"error,omitempty"`
	Score
	FinishedAt time.Time `json:"finished_at"`
}

type key struct {
	world, config string
	rollout       int
}

func (r Result) key() key { return key{r.World, r.Config, r.Rollout} }

// NewID is a sortable, unique eval id.
func NewID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return "e-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Dir is the directory of eval id.
func Dir(home, id string) string { return filepath.Join(home, "evals", id) }

// Start resolves the suite's worlds (building and generating as needed),
// writes the plan and runs every rollout. It returns the eval id; the
// error is about the eval itself, not about how rollouts went.
func Start(ctx context.Context, s *Suite, opts Options) (string, error) {
	opts = opts.withDefaults()
	plan, err := Prepare(s, opts)
	if err != nil {
		return "", err
	}
	id, dir := plan.ID, Dir(opts.Home, plan.ID)
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "eval %s: %d rollouts (%d worlds × %d configurations × %d), at most %d at once; results in %s (after a stop: apodex eval resume %s)\n",
			id, plan.Total(), len(plan.Worlds), len(plan.Configs), plan.Rollouts, opts.Parallel, filepath.Join(dir, ResultsFile), id)
	}
	return id, execute(ctx, plan, opts)
}

// Prepare resolves the suite's worlds (building and generating as needed)
// and writes the plan of a new eval, without running anything.
func Prepare(s *Suite, opts Options) (*Plan, error) {
	opts = opts.withDefaults()
	id := NewID(opts.Clock.Now())
	dir := Dir(opts.Home, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: %v; pass --home to a writable directory", err)
	}
	plan := &Plan{ID: id, Suite: s.Name, Configs: s.Configs, Rollouts: s.Rollouts, MaxAttempts: s.MaxAttempts, Created: opts.Clock.Now().UTC()}
	st := world.NewStore(opts.Home)
	for _, ref := range s.Worlds {
		ws, err := resolve(st, ref, filepath.Join(dir, "gen"))
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		for _, w := range ws {
			plan.Worlds = append(plan.Worlds, PlanWorld{ID: w.ID, Name: w.Name, Family: w.Family, Level: w.Gen.Level})
		}
	}
	raw, _ := json.MarshalIndent(plan, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, PlanFile), raw, 0o644); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	return plan, nil
}

// Resume runs the rollouts of eval id that have no result yet.
func Resume(ctx context.Context, id string, opts Options) error {
	opts = opts.withDefaults()
	plan, err := ReadPlan(opts.Home, id)
	if err != nil {
		return err
	}
	return execute(ctx, plan, opts)
}

func (o Options) withDefaults() Options {
	if o.Parallel <= 0 {
		o.Parallel = runtime.NumCPU()
	}
	o.Clock = clock.Or(o.Clock)
	if o.Sandbox == "" {
		o.Sandbox = sandbox.KindAuto
	}
	return o
}

func resolve(st *world.Store, ref WorldRef, genDir string) ([]*world.World, error) {
	switch {
	case ref.ID != "":
		w, err := st.Get(ref.ID)
		return []*world.World{w}, err
	case ref.Dir != "":
		w, _, err := st.Build(ref.Dir)
		return []*world.World{w}, err
	}
	var out []*world.World
	for i := 0; i < max(ref.Gen.Count, 1); i++ {
		spec := gen.Spec{Family: ref.Gen.Family, Seed: ref.Gen.Seed + int64(i), Level: ref.Gen.Level}
		d := filepath.Join(genDir, spec.Name())
		if _, err := os.Stat(d); err != nil {
			if _, err := gen.Generate(spec, d); err != nil {
				return nil, fmt.Errorf("eval: %w", err)
			}
		}
		w, _, err := st.Build(d)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// ReadPlan reads eval id's plan.
func ReadPlan(home, id string) (*Plan, error) {
	raw, err := os.ReadFile(filepath.Join(Dir(home, id), PlanFile))
	if err != nil {
		return nil, fmt.Errorf("eval: no eval %s in %s: %v; see `ls %s`", id, filepath.Join(home, "evals"), err, filepath.Join(home, "evals"))
	}
	p := &Plan{}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("eval: %s is damaged: %v", PlanFile, err)
	}
	return p, nil
}

// ReadResults reads results.jsonl, leaving out a torn last line.
func ReadResults(home, id string) ([]Result, error) {
	f, err := os.Open(filepath.Join(Dir(home, id), ResultsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	var out []Result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var r Result
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.World != "" {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// sink appends results, one synced line each, and counts them.
type sink struct {
	mu         sync.Mutex
	f, started *os.File
	done       int
	base       int // done before this process started
	passed     int
	total      int
	begin      time.Time
	progress   io.Writer
	id         string
	now        func() time.Time
}

func (s *sink) start(k key, runID string) {
	line, _ := json.Marshal(map[string]any{"world": k.world, "config": k.config, "rollout": k.rollout, "run_id": runID})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started.Write(append(line, '\n'))
}

func (s *sink) add(r Result) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	s.done++
	if r.Correct == 1 {
		s.passed++
	}
	if s.progress != nil {
		el := s.now().Sub(s.begin)
		eta := time.Duration(float64(el) / float64(s.done-s.base) * float64(s.total-s.done)).Round(time.Second)
		mark := "FAILED"
		if r.Correct == 1 {
			mark = "passed"
		}
		fmt.Fprintf(s.progress, "eval %s: %d/%d done, pass rate %.0f%% so far, ETA %s; %s %s #%d %s (%d tokens)\n",
			s.id, s.done, s.total, 100*float64(s.passed)/float64(s.done), eta, r.WorldName, r.Config, r.Rollout, mark, r.Tokens)
	}
	return nil
}

func execute(ctx context.Context, plan *Plan, opts Options) error {
	dir := Dir(opts.Home, plan.ID)
	done, err := ReadResults(opts.Home, plan.ID)
	if err != nil {
		return err
	}
	if err := dropTornTail(filepath.Join(dir, ResultsFile)); err != nil {
		return err
	}
	cleanupStarted(opts.Home, dir)
	have := map[key]bool{}
	for _, r := range done {
		have[r.key()] = true
	}
	var jobs []key
	for _, w := range plan.Worlds {
		for _, c := range plan.Configs {
			for i := 0; i < plan.Rollouts; i++ {
				if k := (key{w.ID, c.Name, i}); !have[k] {
					jobs = append(jobs, k)
				}
			}
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, ResultsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	sf, err := os.OpenFile(filepath.Join(dir, startedFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer sf.Close()
	out := &sink{f: f, started: sf, done: len(done), base: len(done), total: plan.Total(), begin: opts.Clock.Now(), progress: opts.Progress, id: plan.ID, now: opts.Clock.Now}
	for _, r := range done {
		if r.Correct == 1 {
			out.passed++
		}
	}
	out.begin = opts.Clock.Now()
	worlds := map[string]PlanWorld{}
	for _, w := range plan.Worlds {
		worlds[w.ID] = w
	}
	configs := map[string]Config{}
	for _, c := range plan.Configs {
		configs[c.Name] = c
	}
	r := &roller{opts: opts, store: world.NewStore(opts.Home), sink: out}
	queue := make(chan key)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	for i := 0; i < min(opts.Parallel, max(len(jobs), 1)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range queue {
				res := r.rollout(ctx, worlds[k.world], configs[k.config], k.rollout)
				if ctx.Err() != nil && res.Status != "completed" {
					continue // cut off by the stop: left for Resume
				}
				if err := out.add(res); err != nil {
					errMu.Lock()
					firstErr = cmpErr(firstErr, err)
					errMu.Unlock()
				}
			}
		}()
	}
	for _, k := range jobs {
		select {
		case queue <- k:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(queue)
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("eval: write results: %w", firstErr)
	}
	return ctx.Err()
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// dropTornTail cuts a last line without its newline (a write cut by a
// kill), so appends start on a line of their own.
func dropTornTail(path string) error {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || len(raw) == 0 || raw[len(raw)-1] == '\n' {
		return nil
	} else if err != nil {
		return err
	}
	return os.Truncate(path, int64(bytes.LastIndexByte(raw, '\n')+1))
}

// cleanupStarted removes the overlays of rollouts a killed eval left
// mounted.
func cleanupStarted(home, dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, startedFile))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(raw), "\n") {
		var s struct {
			RunID string `json:"run_id"`
		}
		if json.Unmarshal([]byte(l), &s) == nil && s.RunID != "" && !strings.ContainsAny(s.RunID, `/\`) {
			worktree.Cleanup(filepath.Join(home, "runs", s.RunID, "world"))
		}
	}
}

// RolloutRuns maps the run id of every rollout of every eval under home to
// its eval id (from each eval's started.jsonl and results.jsonl), so that
// run listings can tell rollouts from runs people started.
func RolloutRuns(home string) map[string]string {
	out := map[string]string{}
	evals, _ := os.ReadDir(filepath.Join(home, "evals"))
	for _, e := range evals {
		if !e.IsDir() {
			continue
		}
		for _, f := range []string{startedFile, ResultsFile} {
			raw, err := os.ReadFile(filepath.Join(Dir(home, e.Name()), f))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(raw), "\n") {
				var s struct {
					RunID string `json:"run_id"`
				}
				if json.Unmarshal([]byte(l), &s) == nil && s.RunID != "" {
					out[s.RunID] = e.Name()
				}
			}
		}
	}
	return out
}
