// Package replay re-executes a finished run (R-REC-2) in a fresh home, from
// its recorded initial state and with a model that returns the recorded
// outputs, running every tool for real, and compares the two records.
//
// Guarantees:
//   - a record that fails its hash chain or head (record.ReadChecked) is
//     refused, naming the first bad seq and its line;
//   - only a finished run whose every event type this version knows is
//     replayed; its commands run in the sandbox kind the run recorded; a
//     run recorded without a sandbox, or whose record contradicts itself
//     on isolation, is replayed only unisolated and only when the caller
//     asks for that (run.SandboxFor);
//   - a changed or missing input is a divergence of kind initial_state and
//     nothing is replayed;
//   - the report lists every divergence in the original's seq order, each
//     with its class (nondeterministic output, environment, policy;
//     package divergence) — the comparison goes on past the first; the
//     runs are identical when none is of another class than
//     nondeterministic output;
//   - an agent's turns are handed out per recorded loop (convs.go): agents
//     the runtime starts (verifiers, investigators, the writer) get theirs
//     in their recorded order, under whatever ids the record gives them;
//   - the user's controls (commands and messages that carried one) are
//     sent to the replay at the point of the record where they were
//     applied: a cancelled run stops where the cancel stopped it;
//   - a resumed run is replayed in its segments: each stop is played as a
//     kill after the segment's last event (the call it cut off stays
//     interrupted, as recorded) and the replay is resumed (segments.go);
//   - the replay reads only the run directory.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/replay/divergence"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/taskstore"
)

// Config is how to replay a run.
type Config struct {
	// TempDir is where the fresh home is made; "" for the system's.
	TempDir string
	// Keep leaves the replay's home in place (Report.ReplayDir).
	Keep bool
	// OrderWait bounds how long a turn waits for the recorded order of
	// effects; default 10 s.
	OrderWait time.Duration
	// Sandbox is the user's --sandbox: "" replays the commands in the
	// sandbox the run recorded (run.SandboxFor: a run recorded without one,
	// or a record that contradicts itself, is refused), "none" without
	// isolation.
	Sandbox string
	// NetworkAllow is the user's --network-allow, which must give again
	// every prefix the run recorded (run.NetworkAllowFor).
	NetworkAllow []string
	// Progress receives the replay's step lines; nil for none.
	Progress io.Writer
}

// Report is the outcome of a replay (R-REC-2).
type Report struct {
	RunID string `json:"run_id"`
	// Identical: no divergence but of class nondeterministic_output.
	Identical bool `json:"identical"`
	// Divergence is the first that is not nondeterministic output, in the
	// original's seq order.
	Divergence *Divergence `json:"divergence,omitempty"`
	// Divergences are all of them, in the original's seq order, and
	// Classes counts them by class.
	Divergences []Divergence   `json:"divergences,omitempty"`
	Classes     map[string]int `json:"classes,omitempty"`
	Compared    Compared       `json:"compared"`
	// Events is the length of the original record.
	Events     int   `json:"events"`
	DurationMS int64 `json:"duration_ms"`
	// Notes say what the replay could not hold exactly as recorded.
	Notes []string `json:"notes,omitempty"`
	// ReplayDir is the replay's run directory when it was kept.
	ReplayDir string `json:"replay_dir,omitempty"`
}

// Run re-executes the finished run in dir in a fresh home, from its
// recorded initial state and with its recorded model outputs, running every
// tool for real, and compares the two records: each tool call, each
// observation (normalized, see the rules in compare.go), each file
// change and the final files. A changed or missing input is a divergence of
// kind initial_state and nothing is replayed. The error is for a run that
// cannot be replayed at all.
func Run(ctx context.Context, dir string, rc Config) (Report, error) {
	start := time.Now()
	rep := Report{RunID: filepath.Base(dir)}
	if l := runview.Liveness(dir); l != runview.Finished {
		return rep, &run.ConfigError{Msg: fmt.Sprintf("run %s is %s: only a finished run can be replayed (resume it with apodex resume first)", rep.RunID, l)}
	}
	c, err := record.ReadChecked(dir) // a record changed by hand is refused, named
	if err != nil {
		return rep, err
	}
	rep.Events = len(c.Events)
	proj := runstate.New()
	evs := make([]event, len(c.Events)) // each with its payload, decoded once for the folds below
	for i, e := range c.Events {
		if err := proj.Apply(e); err != nil {
			return rep, err
		}
		evs[i].Event = e
		evs[i].p, _ = record.DecodePayload(e) // it decodes: Apply took it
	}
	if len(proj.Unknown) > 0 {
		u := proj.Unknown[0]
		return rep, &run.ConfigError{Msg: fmt.Sprintf("run %s holds an event of type %q (seq %d) that this version of apodex does not know; replay it with the version that wrote it", rep.RunID, u.Type, u.Seq)}
	}
	if proj.Started == nil {
		return rep, fmt.Errorf("replay: the record of run %s does not start with run_started", rep.RunID)
	}
	rec := run.Recorded{Started: *proj.Started, Settings: run.SettingsFrom(proj.Settings), At: proj.StartedAt}
	if problems := runview.InputProblems(dir, rec.Started.Inputs); len(problems) > 0 {
		rep.setDivergences([]Divergence{{Class: ClassEnvironment, Kind: KindInitialState, Seq: c.Events[0].Seq, What: "the run's inputs",
			Expected: "the inputs recorded in run_started", Got: strings.Join(problems, "; ")}})
		rep.DurationMS = time.Since(start).Milliseconds()
		return rep, nil
	}
	st := rec.Settings
	kind, err := run.SandboxFor(rec.Started, rc.Sandbox)
	if err == nil {
		err = run.NetworkAllowFor(rec.Started, rc.NetworkAllow)
	}
	if err != nil {
		return rep, err
	}
	if st.Network {
		rep.Notes = append(rep.Notes, "the run's commands had network access; replayed, they reach the network again, which need not answer the same")
	}
	if rec.Started.Sandbox.Kind == "unavailable" {
		rep.Notes = append(rep.Notes, "the run had no sandbox (its bash calls were refused); the replay runs them if a sandbox is available here")
	}
	home, err := os.MkdirTemp(rc.TempDir, "apodex-replay-")
	if err != nil {
		return rep, fmt.Errorf("run: replay home: %w", err)
	}
	replayDir := filepath.Join(home, "runs", rep.RunID)
	if rc.Keep {
		rep.ReplayDir = replayDir
	} else {
		defer os.RemoveAll(home)
	}
	wait := rc.OrderWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	gate := newOrderGate(evs, replayDir, wait)
	defer gate.close()
	model, err := newReplayModel(dir, evs, st, gate)
	if err != nil {
		return rep, err
	}
	cfg := replayConfig(rec, kind, home, dir, model)
	cfg.Contract = replayContract(proj, cfg.Objective)
	cfg.NewID = func() string { return rep.RunID } // the same id: only the home differs
	cfg.Progress = stepWriter{gate: gate, next: rc.Progress, notes: model.note}
	if err := playSegments(ctx, segmentsOf(evs), cfg, replayDir, gate, model); err != nil {
		return rep, fmt.Errorf("run: replay: %w", err)
	}
	rc2, err := record.Read(replayDir)
	if err != nil {
		return rep, fmt.Errorf("run: read the replay's record: %w", err)
	}
	ds, cnt := divergence.Find(c.Events, dir, rc2.Events, replayDir)
	rep.Compared = cnt
	rep.setDivergences(append(ds, append(model.anomalies, model.unconsumed()...)...))
	rep.Notes = append(rep.Notes, model.notes...)
	rep.Notes = append(rep.Notes, unreplayed(evs)...)
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, nil
}

// setDivergences keeps ds in the original's seq order, counts them by
// class and finds the first that makes the replay differ.
func (rep *Report) setDivergences(ds []Divergence) {
	divergence.Sort(ds)
	rep.Divergences, rep.Classes, rep.Divergence = ds, nil, nil
	for i, d := range ds {
		if rep.Classes == nil {
			rep.Classes = map[string]int{}
		}
		rep.Classes[d.Class]++
		if d.Class != ClassNoise && rep.Divergence == nil {
			rep.Divergence = &ds[i]
		}
	}
	rep.Identical = rep.Divergence == nil
}

// replayConfig runs the recorded run again the way it was started: its
// settings as they are, in the sandbox kind SandboxFor chose, its inputs
// (the run's own copy), its objective as the user gave it.
func replayConfig(rec run.Recorded, kind, home, dir string, model llm.Model) run.Config {
	u0 := rec.Settings.U0
	if u0 == "" {
		u0 = rec.Started.Objective
	}
	info := rec.Started.Model
	info.Provider, info.Script, info.ScriptRef = "replay", "", ""
	cfg := run.Config{Settings: rec.Settings, Home: home, Objective: u0, InputsDir: filepath.Join(dir, "inputs"), Model: model, ModelInfo: info}
	cfg.Sandbox = kind
	cfg.MaxAttempts = max(cfg.MaxAttempts, 1)
	cfg.EvidenceFrom = dir // fetched pages come from the record, not the network
	cfg.MCPFrom = dir      // so do MCP results: no server is started
	// The project instructions are quoted as the run quoted them.
	cfg.Instructions, _ = run.LoadInstructions(dir, rec.Settings)
	if rec.Settings.Repo != nil {
		cfg.RepoFrom = dir // /workspace starts from the run's baseline
	}
	if w := run.ReplayWorld(dir, rec.Started); w != nil {
		cfg.World, cfg.InputsDir = w, "" // the same world, staged afresh
	}
	return cfg
}

// replayContract is the contract a replay starts from: the objective as
// the user gave it and the original's first contract's deliverables
// (taskstore.Outline), which decide what a team's writer writes
// (synthesis). The task file's clauses are left out: they run commands and
// a judge after the agents end, for the final gate, which the replay does
// not compare; the rest of the task shapes only the agent's first message,
// which the replayed model does not read.
func replayContract(st *runstate.State, objective string) *contract.Contract {
	if len(st.Contracts) == 0 {
		return contract.FromObjective(objective)
	}
	return taskstore.Outline(st.Contracts[0].Contract, objective)
}

// playSegments runs the replay segment by segment (see segment): the first
// started afresh, each next one resumed from the replay's record cut where
// the original's stop cut it.
func playSegments(ctx context.Context, segs []segment, cfg run.Config, replayDir string, gate *orderGate, model *replayModel) error {
	for i, sg := range segs {
		model.setLimit(sg.end)
		halt, cut := make(chan struct{}), make(chan int, 1)
		cfg.Halt = nil
		if sg.end > 0 && !sg.finished {
			cfg.Halt = halt
		}
		pctx, stop := context.WithCancel(ctx)
		played := make(chan struct{})
		go func() {
			defer close(played)
			sg.play(pctx, gate, replayDir, halt, cut, model.note)
		}()
		var err error
		if i == 0 {
			_, err = run.Execute(ctx, cfg)
		} else {
			// The replay's own record names the sandbox it chose; "none"
			// was the user's choice, so it holds for every segment.
			for _, in := range sg.before { // queued before the original's resume
				if err := inbox.Control(replayDir, in.kind, in.args); err != nil {
					model.note(fmt.Sprintf("the control at seq %d could not be sent to the replay: %v", in.seq, err))
				}
			}
			rc := run.ResumeConfig{Config: cfg}
			if cfg.Sandbox == sandbox.KindNone {
				rc.Sandbox = sandbox.KindNone
			}
			if sg.followUp != "" {
				_, err = run.Continue(ctx, replayDir, sg.followUp, rc)
			} else {
				_, err = run.Resume(ctx, replayDir, rc)
			}
		}
		stop()
		<-played
		switch {
		case sg.end > 0 && errors.Is(err, run.ErrHalted):
			if err := gate.cut(<-cut); err != nil {
				return fmt.Errorf("cut the replay's record at the stop: %w", err)
			}
		case err != nil:
			return err
		case sg.end > 0 && sg.finished:
			// It ended, as the original did; the next segment goes on.
		case sg.end > 0:
			return nil // it ended before the recorded stop: the comparison says where
		}
	}
	return nil
}

// event is one event of the original record with its payload (nil for
// a type this version does not know, which Run refuses).
type event struct {
	record.Event
	p any
}

// unreplayed notes what in the record a replay does not reproduce.
func unreplayed(events []event) []string {
	msgs := 0
	for _, e := range events {
		if m, ok := e.p.(*record.Message); ok && m.Control == "" {
			msgs++
		}
	}
	if msgs == 0 {
		return nil
	}
	return []string{fmt.Sprintf("the run received %d user message(s); the replay does not deliver them (the agents' recorded turns are replayed as they were)", msgs)}
}
