package run

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
)

// ReplayConfig is how to replay a run.
type ReplayConfig struct {
	// TempDir is where the fresh home is made; "" for the system's.
	TempDir string
	// Keep leaves the replay's home in place (ReplayReport.ReplayDir).
	Keep bool
	// OrderWait bounds how long a turn waits for the recorded order of
	// effects; default 10 s.
	OrderWait time.Duration
	// AllowNoSandbox lets a run recorded with --sandbox none replay without
	// isolation too; otherwise such a replay is refused.
	AllowNoSandbox bool
	// Progress receives the replay's step lines; nil for none.
	Progress io.Writer
}

// ReplayReport is the outcome of a replay (R-REC-2).
type ReplayReport struct {
	RunID     string `json:"run_id"`
	Identical bool   `json:"identical"`
	// Divergence is the first one, in the original's seq order.
	Divergence *Divergence `json:"divergence,omitempty"`
	Compared   Compared    `json:"compared"`
	// Events is the length of the original record.
	Events     int   `json:"events"`
	DurationMS int64 `json:"duration_ms"`
	// Notes say what the replay could not hold exactly as recorded.
	Notes []string `json:"notes,omitempty"`
	// ReplayDir is the replay's run directory when it was kept.
	ReplayDir string `json:"replay_dir,omitempty"`
}

// Replay re-executes the finished run in dir in a fresh home, from its
// recorded initial state and with its recorded model outputs, running every
// tool for real, and compares the two records: each tool call, each
// observation (normalized, see the rules in replay_compare.go), each file
// change and the final files. A changed or missing input is a divergence of
// kind initial_state and nothing is replayed. The error is for a run that
// cannot be replayed at all.
func Replay(ctx context.Context, dir string, rc ReplayConfig) (ReplayReport, error) {
	start := time.Now()
	rep := ReplayReport{RunID: filepath.Base(dir)}
	if l := Liveness(dir); l != Finished {
		return rep, &ConfigError{fmt.Sprintf("run %s is %s: only a finished run can be replayed (resume it with apodex resume first)", rep.RunID, l)}
	}
	c, err := record.Read(dir)
	if err != nil {
		return rep, err
	}
	rep.Events = len(c.Events)
	rec, err := ReadStarted(dir)
	if err != nil {
		return rep, err
	}
	if problems := inputProblems(dir, rec.Started.Inputs); len(problems) > 0 {
		rep.Divergence = &Divergence{Kind: KindInitialState, Seq: c.Events[0].Seq, What: "the run's inputs",
			Expected: "the inputs recorded in run_started", Got: strings.Join(problems, "; ")}
		rep.DurationMS = time.Since(start).Milliseconds()
		return rep, nil
	}
	st := rec.Settings
	if rec.Started.Sandbox.Kind == "none" && !rc.AllowNoSandbox {
		return rep, &ConfigError{fmt.Sprintf("run %s ran without a sandbox; replaying it would run its commands on this machine unisolated: pass --sandbox none to accept that", rep.RunID)}
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
	gate := newOrderGate(c.Events, replayDir, wait)
	defer gate.close()
	model, err := newReplayModel(dir, c.Events, st, gate)
	if err != nil {
		return rep, err
	}
	cfg := replayConfig(rec, home, dir, model)
	cfg.NewID = func() string { return rep.RunID } // the same id: only the home differs
	cfg.Progress = stepWriter{gate: gate, next: rc.Progress, notes: model.note}
	if _, err := Execute(ctx, cfg); err != nil {
		return rep, fmt.Errorf("run: replay: %w", err)
	}
	rc2, err := record.Read(replayDir)
	if err != nil {
		return rep, fmt.Errorf("run: read the replay's record: %w", err)
	}
	d, cnt := compare(c.Events, newSide(dir, c.Events), newSide(replayDir, rc2.Events))
	rep.Compared = cnt
	for _, a := range append(model.anomalies, model.unconsumed()...) {
		if d == nil || a.pos() < d.pos() {
			d = &a
		}
	}
	rep.Divergence, rep.Identical = d, d == nil
	rep.Notes = append(rep.Notes, model.notes...)
	rep.Notes = append(rep.Notes, unreplayed(c.Events)...)
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, nil
}

// replayConfig runs the recorded run again the way it was started: its
// settings, its inputs (the run's own copy), its objective as the user gave
// it. A task file's deliverables and clauses are left out: they shape only
// the agent's first message, which the replayed model does not read, and
// the final gate, which the replay does not compare.
func replayConfig(rec Recorded, home, dir string, model llm.Model) Config {
	st := rec.Settings
	u0 := st.U0
	if u0 == "" {
		u0 = rec.Started.Objective
	}
	info := rec.Started.Model
	info.Provider, info.Script = "replay", ""
	cfg := Config{
		Home: home, Objective: u0, InputsDir: filepath.Join(dir, "inputs"),
		Model: model, ModelInfo: info, Mode: st.Mode, Team: st.Team, Budget: st.Budget, Context: st.Context,
		SoftDeadline: st.SoftDeadline, Timeout: st.Timeout, Sandbox: st.Sandbox, Network: st.Network,
		CommandTimeout: st.CommandTimeout, ScratchQuota: st.ScratchQuota,
	}
	cfg.Retry.MaxAttempts = max(st.MaxAttempts, 1)
	if w := replayWorld(dir, rec.Started); w != nil {
		cfg.World, cfg.InputsDir = w, "" // the same world, staged afresh
	}
	return cfg
}

// unreplayed notes what in the record a replay does not reproduce.
func unreplayed(events []record.Event) []string {
	var msgs, resumes int
	for _, e := range events {
		switch e.Type {
		case TypeMessage, TypeControl:
			msgs++
		case TypeResumed:
			resumes++
		}
	}
	var out []string
	if msgs > 0 {
		out = append(out, fmt.Sprintf("the run received %d user message(s) or control(s); the replay does not deliver them (the agents' recorded turns are replayed as they were)", msgs))
	}
	if resumes > 0 {
		out = append(out, fmt.Sprintf("the run was resumed %d time(s) after a stop; a call interrupted by the stop has no recorded result, so the replay diverges there", resumes))
	}
	return out
}

// inputProblems checks the run's inputs/ against the hashes run_started
// recorded: every recorded file there with the same content, nothing else.
func inputProblems(dir string, want []record.FileEntry) []string {
	root := filepath.Join(dir, "inputs")
	wanted := map[string]string{}
	for _, f := range want {
		wanted[f.Path] = f.SHA256
	}
	var problems []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		plane := "/inputs/" + filepath.ToSlash(rel)
		sum, ok := wanted[plane]
		seen[plane] = true
		switch {
		case !ok:
			problems = append(problems, plane+" was added")
		case !d.Type().IsRegular():
			problems = append(problems, plane+" is no longer a regular file")
		default:
			got, _, err := workspace.HashFile(p)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s cannot be read: %v", plane, err))
			} else if got != sum {
				problems = append(problems, fmt.Sprintf("%s changed (recorded %s, now %s)", plane, sum, got))
			}
		}
		return nil
	})
	if err != nil && !(os.IsNotExist(err) && len(want) == 0) {
		problems = append(problems, fmt.Sprintf("the inputs directory cannot be read: %v", err))
	}
	for _, f := range want {
		if !seen[f.Path] {
			problems = append(problems, f.Path+" is missing")
		}
	}
	sort.Strings(problems)
	return problems
}
