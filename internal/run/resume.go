package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
)

// Settings is what a run was started with, recorded in run_started so a
// resume (and a replay) can run it the same way.
type Settings struct {
	Mode           string        `json:"mode"`
	Team           TeamConfig    `json:"team"`
	Budget         agent.Budget  `json:"budget"`
	Context        agent.Context `json:"context"`
	SoftDeadline   time.Duration `json:"soft_deadline"`
	Timeout        time.Duration `json:"timeout"`
	Sandbox        string        `json:"sandbox"`
	Network        bool          `json:"network"`
	CommandTimeout time.Duration `json:"command_timeout"`
	ScratchQuota   int64         `json:"scratch_quota"`
	MaxAttempts    int           `json:"max_attempts"`
	TaskFile       string        `json:"task_file,omitempty"`
	U0             string        `json:"u0,omitempty"`
}

func settingsOf(cfg Config, c *contract.Contract) Settings {
	return Settings{Mode: cfg.Mode, Team: cfg.Team, Budget: cfg.Budget, Context: cfg.Context,
		SoftDeadline: cfg.SoftDeadline, Timeout: cfg.Timeout, Sandbox: cfg.Sandbox, Network: cfg.Network,
		CommandTimeout: cfg.CommandTimeout, ScratchQuota: cfg.ScratchQuota, MaxAttempts: cfg.Retry.MaxAttempts,
		TaskFile: c.File, U0: c.U0}
}

// Recorded is what the record says a run was started with.
type Recorded struct {
	Started  record.RunStarted
	Settings Settings
	At       time.Time
}

// ReadStarted reads a run's run_started event.
func ReadStarted(dir string) (Recorded, error) {
	first, err := record.First(dir)
	if err != nil {
		return Recorded{}, err
	}
	if first.Type != record.TypeRunStarted {
		return Recorded{}, errors.New("run: the record does not start with run_started")
	}
	var r Recorded
	if err := first.Decode(&r.Started); err != nil {
		return r, err
	}
	r.At = first.Time
	if raw, err := json.Marshal(r.Started.Settings["run"]); err == nil {
		json.Unmarshal(raw, &r.Settings)
	}
	return r, nil
}

// ResumeConfig is what a resume needs beyond the record.
type ResumeConfig struct {
	// Model, Progress and Now as in Config; ModelInfo is the model's record
	// (the recorded one when the caller rebuilt it from the record).
	Config
}

// Resume continues a run that stopped without finishing (killed, crashed,
// power lost) from its record (R-REC-4): the torn last line is cut, every
// agent's history and counters, the board, the assignments, the lease, the
// message queue and the budgets are rebuilt; the step in flight is treated
// as interrupted (a model call is made again, a tool call is reported to
// its agent as interrupted); then the run goes on to its end. The record
// says where and why it resumed.
func Resume(ctx context.Context, dir string, rc ResumeConfig) (Summary, error) {
	cfg := rc.Config
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch Liveness(dir) {
	case Finished:
		return Summary{}, &ConfigError{fmt.Sprintf("run %s has finished; there is nothing to resume", filepath.Base(dir))}
	case Live:
		return Summary{}, &ConfigError{fmt.Sprintf("run %s is live in another process; send it messages with apodex say, or pause/resume it", filepath.Base(dir))}
	}
	log, contents, repaired, err := record.Open(dir, cfg.Now)
	if err != nil {
		return Summary{}, err
	}
	rec, err := ReadStarted(dir)
	if err != nil {
		log.Close()
		return Summary{}, err
	}
	if rw, ok := recordedWorld(rec.Started); ok { // its workspace lived in an overlay that died with the process
		log.Close()
		return Summary{}, &ConfigError{fmt.Sprintf("run %s is a rollout of world %s, which cannot be resumed yet: start a fresh one with apodex run --world %s (apodex eval resume reruns an eval's unfinished rollouts)", filepath.Base(dir), rw.ID, rw.ID)}
	}
	st := rec.Settings
	cfg.Mode, cfg.Team, cfg.Budget, cfg.Context = st.Mode, st.Team, st.Budget, st.Context
	cfg.SoftDeadline, cfg.Timeout, cfg.Sandbox, cfg.Network = st.SoftDeadline, st.Timeout, st.Sandbox, st.Network
	cfg.CommandTimeout, cfg.ScratchQuota, cfg.Retry.MaxAttempts = st.CommandTimeout, st.ScratchQuota, max(st.MaxAttempts, 1)
	if cfg.ModelInfo.Provider == "" {
		cfg.ModelInfo = rec.Started.Model
	}
	c, err := recordedContract(st, rec.Started.Objective)
	if err != nil {
		log.Close()
		return Summary{}, err
	}
	agents, err := checkpoint.Agents(dir, contents.Events)
	if err != nil {
		log.Close()
		return Summary{}, fmt.Errorf("run: rebuild the agents: %w", err)
	}
	fs := &workspace.FS{Inputs: filepath.Join(dir, "inputs"), Workspace: filepath.Join(dir, "workspace"), Outputs: filepath.Join(dir, "outputs")}
	worktree.Cleanup(filepath.Join(dir, "worktrees"))
	workspace.RemoveTemps(fs.Workspace) // atomic writes cut off by the stop
	workspace.RemoveTemps(fs.Outputs)
	ss, err := open(cfg, filepath.Base(dir), dir, fs, log, c)
	if err != nil {
		log.Close()
		return Summary{}, err
	}
	defer ss.close()
	ss.began = rec.At
	if n := len(contents.Events); n > 0 {
		// The run is charged for the time it ran, not for the time it lay stopped.
		ss.began = ss.start.Add(-contents.Events[n-1].Time.Sub(rec.At))
	}
	if err := ss.restorePlanes(contents.Events); err != nil {
		return Summary{}, err
	}
	last := int64(0)
	if n := len(contents.Events); n > 0 {
		last = contents.Events[n-1].Seq
	}
	log.Append(TypeResumed, "", map[string]any{
		"after_seq": last, "repaired_torn_tail": repaired, "in_flight": checkpoint.Stopped(agents),
		"reason": "the process stopped without finishing (killed or crashed); resumed from the record",
	})
	log.Sync()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "apodex: resuming run %s after event %d\n", ss.id, last)
	}
	ss.warnSandbox()
	return ss.run(ctx, &resumed{events: contents.Events, agents: agents})
}

// TypeResumed marks where a resumed run picked up.
const TypeResumed = "resumed"

// recordedContract rebuilds the contract: from the task file when the run
// had one, else from the objective the user gave.
func recordedContract(st Settings, objective string) (*contract.Contract, error) {
	if st.TaskFile != "" {
		c, err := contract.Load(st.TaskFile)
		if err != nil {
			return nil, fmt.Errorf("run: reload the task file %s: %w", st.TaskFile, err)
		}
		if st.U0 != "" {
			c.SetObjective(st.U0)
		}
		return c, nil
	}
	u0 := st.U0
	if u0 == "" {
		u0 = objective
	}
	return contract.FromObjective(u0), nil
}

// restorePlanes rebuilds the lease and manifest and reconciles the inbox
// with the messages and controls the record already holds, so none is
// delivered or applied twice.
func (ss *session) restorePlanes(events []record.Event) error {
	var leases []publish.LeaseEvent
	for _, e := range events {
		switch e.Type {
		case record.TypeLease:
			var le publish.LeaseEvent
			if e.Decode(&le) == nil {
				le.Agent = e.Agent
				leases = append(leases, le)
			}
		case TypeMessage:
			var m struct{ ID string }
			if e.Decode(&m) == nil && m.ID != "" {
				ss.in.MarkDelivered(m.ID, e.Seq)
			}
		case TypeControl:
			var m struct{ ID string }
			if e.Decode(&m) == nil && m.ID != "" {
				ss.in.MarkApplied(m.ID, e.Seq)
			}
		}
	}
	return ss.plane.Restore(leases)
}
