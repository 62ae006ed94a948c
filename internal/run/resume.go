package run

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/taskstore"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
)

// Settings is what a run was started with, recorded in run_started (as
// record.RunSettings) so a resume (and a replay) can run it the same way.
type Settings struct {
	Mode           string                  `json:"mode"`
	Team           TeamConfig              `json:"team"`
	Budget         agent.Budget            `json:"budget"`
	Context        agent.Context           `json:"context"`
	SoftDeadline   time.Duration           `json:"soft_deadline"`
	Timeout        time.Duration           `json:"timeout"`
	Sandbox        string                  `json:"sandbox"`
	Network        bool                    `json:"network"`
	HostNetwork    bool                    `json:"host_network,omitempty"`
	Limits         Limits                  `json:"limits,omitzero"`
	CommandTimeout time.Duration           `json:"command_timeout"`
	ScratchQuota   int64                   `json:"scratch_quota"`
	MaxAttempts    int                     `json:"max_attempts"`
	TaskFile       string                  `json:"task_file,omitempty"`
	U0             string                  `json:"u0,omitempty"`
	RequireFinish  bool                    `json:"require_finish,omitempty"`
	Evidence       record.EvidenceSettings `json:"evidence"`
}

func settingsOf(cfg Config, c *contract.Contract) Settings {
	return Settings{Mode: cfg.Mode, Team: cfg.Team, Budget: cfg.Budget, Context: cfg.Context,
		SoftDeadline: cfg.SoftDeadline, Timeout: cfg.Timeout, Sandbox: cfg.Sandbox, Network: cfg.Network, HostNetwork: cfg.HostNetwork, Limits: limitsOf(cfg.Limits),
		CommandTimeout: cfg.CommandTimeout, ScratchQuota: cfg.ScratchQuota, MaxAttempts: cfg.Retry.MaxAttempts,
		TaskFile: c.File, U0: c.U0, RequireFinish: cfg.RequireFinish, Evidence: cfg.Evidence.settings()}
}

// Record is the settings as the record keeps them.
func (s Settings) Record() *record.RunSettings {
	budget := func(b agent.Budget) record.BudgetSettings {
		return record.BudgetSettings{MaxTurns: b.MaxTurns, MaxToolCalls: b.MaxToolCalls, MaxTokens: b.MaxTokens}
	}
	return &record.RunSettings{
		Mode: s.Mode,
		Team: record.TeamSettings{Concurrency: s.Team.Concurrency, Isolation: s.Team.Isolation, Plan: s.Team.Plan,
			SubBudget: budget(s.Team.SubBudget), SubTimeout: record.Duration(s.Team.SubTimeout), MergeIgnore: s.Team.MergeIgnore},
		Budget: budget(s.Budget),
		Context: record.ContextSettings{Window: s.Context.Window, At: s.Context.At, To: s.Context.To,
			KeepRecent: s.Context.KeepRecent, KeepTail: s.Context.KeepTail},
		SoftDeadline: record.Duration(s.SoftDeadline), Timeout: record.Duration(s.Timeout),
		Sandbox: s.Sandbox, Network: s.Network, HostNetwork: s.HostNetwork,
		Limits: record.LimitSettings{MemLimit: s.Limits.Memory, PidsLimit: s.Limits.Pids, TmpSize: s.Limits.TmpSize,
			WorkspaceQuota: s.Limits.WorkspaceBytes, WorkspaceFiles: s.Limits.WorkspaceFiles},
		CommandTimeout: record.Duration(s.CommandTimeout),
		ScratchQuota:   s.ScratchQuota, MaxAttempts: s.MaxAttempts, TaskFile: s.TaskFile, U0: s.U0,
		RequireFinish: s.RequireFinish, Evidence: s.Evidence,
	}
}

// SettingsFrom reads recorded settings back.
func SettingsFrom(r *record.RunSettings) Settings {
	if r == nil {
		return Settings{}
	}
	budget := func(b record.BudgetSettings) agent.Budget {
		return agent.Budget{MaxTurns: b.MaxTurns, MaxToolCalls: b.MaxToolCalls, MaxTokens: b.MaxTokens}
	}
	return Settings{
		Mode: r.Mode,
		Team: TeamConfig{Concurrency: r.Team.Concurrency, Isolation: r.Team.Isolation, Plan: r.Team.Plan,
			SubBudget: budget(r.Team.SubBudget), SubTimeout: r.Team.SubTimeout.D(), MergeIgnore: r.Team.MergeIgnore},
		Budget: budget(r.Budget),
		Context: agent.Context{Window: r.Context.Window, At: r.Context.At, To: r.Context.To,
			KeepRecent: r.Context.KeepRecent, KeepTail: r.Context.KeepTail},
		SoftDeadline: r.SoftDeadline.D(), Timeout: r.Timeout.D(), Sandbox: r.Sandbox, Network: r.Network, HostNetwork: r.HostNetwork,
		Limits: Limits{Memory: r.Limits.MemLimit, Pids: r.Limits.PidsLimit, TmpSize: r.Limits.TmpSize,
			WorkspaceBytes: r.Limits.WorkspaceQuota, WorkspaceFiles: r.Limits.WorkspaceFiles},
		CommandTimeout: r.CommandTimeout.D(), ScratchQuota: r.ScratchQuota, MaxAttempts: r.MaxAttempts,
		TaskFile: r.TaskFile, U0: r.U0, RequireFinish: r.RequireFinish, Evidence: r.Evidence,
	}
}

// Limits are the per-command sandbox limits a run was started with.
type Limits struct {
	Memory         int64 `json:"mem_limit,omitempty"`
	Pids           int64 `json:"pids_limit,omitempty"`
	TmpSize        int64 `json:"tmp_size,omitempty"`
	WorkspaceBytes int64 `json:"workspace_quota,omitempty"`
	WorkspaceFiles int64 `json:"workspace_files,omitempty"`
}

func limitsOf(l sandbox.Limits) Limits {
	return Limits{l.Memory, l.Pids, l.TmpSize, l.Workspace.Bytes, l.Workspace.Files}
}

// Sandbox is the limits as the sandbox takes them.
func (l Limits) Sandbox() sandbox.Limits {
	return sandbox.Limits{Memory: l.Memory, Pids: l.Pids, TmpSize: l.TmpSize, Workspace: sandbox.Quota{Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles}}
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
	r.Settings = SettingsFrom(r.Started.Settings)
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
		cfg.Now = clock.Or(cfg.Clock).Now
	}
	reason := "the process stopped without finishing (killed or crashed); resumed from the record"
	switch Liveness(dir) {
	case Finished:
		term, ok := ResumableEnd(dir)
		if !ok {
			return Summary{}, &ConfigError{fmt.Sprintf("run %s has finished (%s); there is nothing to resume", filepath.Base(dir), term)}
		}
		reason = "the run ended with " + term + "; resumed from the record"
	case Live:
		return Summary{}, &ConfigError{fmt.Sprintf("run %s is live in another process; send it messages with apodex say, or pause/resume it", filepath.Base(dir))}
	}
	log, contents, repaired, err := record.Open(dir, cfg.Now)
	if err != nil {
		return Summary{}, err
	}
	st := runstate.New()
	for _, e := range contents.Events {
		if err := st.Apply(e); err != nil {
			log.Close()
			return Summary{}, fmt.Errorf("run: the record cannot be resumed: %w", err)
		}
	}
	if err := st.CheckResumable(); err != nil {
		log.Close()
		return Summary{}, &ConfigError{fmt.Sprintf("run %s: %v", filepath.Base(dir), err)}
	}
	if st.Started == nil {
		log.Close()
		return Summary{}, errors.New("run: the record does not start with run_started")
	}
	rec := Recorded{Started: *st.Started, Settings: SettingsFrom(st.Settings), At: st.StartedAt}
	if rw, ok := recordedWorld(rec.Started); ok { // its workspace lived in an overlay that died with the process
		log.Close()
		return Summary{}, &ConfigError{fmt.Sprintf("run %s is a rollout of world %s, which cannot be resumed yet: start a fresh one with apodex run --world %s (apodex eval resume reruns an eval's unfinished rollouts)", filepath.Base(dir), rw.ID, rw.ID)}
	}
	set := rec.Settings
	cfg.Mode, cfg.Team, cfg.Budget, cfg.Context = set.Mode, set.Team, set.Budget, set.Context
	cfg.SoftDeadline, cfg.Timeout, cfg.Sandbox, cfg.Network = set.SoftDeadline, set.Timeout, set.Sandbox, set.Network
	cfg.CommandTimeout, cfg.ScratchQuota, cfg.Retry.MaxAttempts = set.CommandTimeout, set.ScratchQuota, max(set.MaxAttempts, 1)
	cfg.RequireFinish = set.RequireFinish
	cfg.Limits, cfg.HostNetwork = set.Limits.Sandbox(), set.HostNetwork
	if cfg.ModelInfo.Provider == "" {
		cfg.ModelInfo = rec.Started.Model
	}
	cfg.Evidence = RecordedEvidence(set.Evidence)
	c, err := taskstore.Rebuild(dir, st)
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
	if err := ss.restorePlanes(st); err != nil {
		return Summary{}, err
	}
	last := int64(0)
	if n := len(contents.Events); n > 0 {
		last = contents.Events[n-1].Seq
	}
	log.Append(record.TypeResumed, "", record.Resumed{
		AfterSeq: last, RepairedTornTail: repaired, InFlight: checkpoint.Stopped(agents),
		Reason: reason,
	})
	log.Sync()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "apodex: resuming run %s after event %d\n", ss.id, last)
	}
	ss.warnSandbox()
	return ss.run(ctx, &resumed{st: st, events: contents.Events, agents: agents})
}

// ResumableEnd reports how a finished run ended, and whether that end can
// be resumed: a model error (the endpoint failed, refused a request or was
// unreachable past the retries) leaves the run where it was, so once the
// endpoint answers again (or with --base-url/--model) it goes on.
func ResumableEnd(dir string) (termination string, ok bool) {
	e, err := record.Last(dir)
	if err != nil || e.Type != record.TypeRunFinished {
		return "", false
	}
	var rf record.RunFinished
	if e.Decode(&rf) != nil {
		return "", false
	}
	return rf.Termination, rf.Termination == string(agent.ModelError)
}

// restorePlanes rebuilds the lease and manifest and reconciles the inbox
// with the messages and controls the record already holds, so none is
// delivered or applied twice.
func (ss *session) restorePlanes(st *runstate.State) error {
	var leases []publish.LeaseEvent
	for _, le := range st.Lease.Events {
		leases = append(leases, publish.LeaseEvent{Agent: le.Agent, Lease: le.Lease})
	}
	for _, m := range st.Messages {
		if m.ID != "" {
			ss.in.MarkDelivered(m.ID, m.Seq)
		}
	}
	for _, c := range st.Controls {
		if c.ID != "" && !c.FromMessage {
			ss.in.MarkApplied(c.ID, c.Seq)
		}
	}
	return ss.plane.Restore(leases)
}
