package run

import (
	"context"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/agent"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/taskstore"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
)

// ResumeConfig is what a resume needs beyond the record.
type ResumeConfig struct {
	// Model, Progress and Now as in Config; ModelInfo is the model's record
	// (the recorded one when the caller rebuilt it from the record). Its
	// Settings are ignored: a resume runs with the recorded ones.
	Config
	// Sandbox is the user's --sandbox: "" runs the commands in the sandbox
	// the run recorded, "none" without isolation (see SandboxFor).
	Sandbox string
	// NetworkAllow is the user's --network-allow, which must give again
	// every prefix the run recorded (NetworkAllowFor).
	NetworkAllow []string
}

// Resume continues a run that stopped without finishing (killed, crashed,
// power lost) from its record (R-REC-4): the torn last line is cut, every
// agent's history and counters, the board, the assignments, the lease, the
// message queue and the budgets are rebuilt; the step in flight is treated
// as interrupted (a model call is made again, a tool call is reported to
// its agent as interrupted); then the run goes on to its end. The record
// says where and why it resumed.
func Resume(ctx context.Context, dir string, rc ResumeConfig) (Summary, error) {
	return resume(ctx, dir, rc, "")
}

// Continue starts a new segment of a finished run (R-REC-4's resume, after
// run_finished): the follow-up is queued as a user message that revises the
// contract, every agent's history is rebuilt as Resume does, the
// coordinator — finished or not — takes the follow-up on its next call,
// with the workspace and outputs as they are and the run's settings
// (budgets changed by a queued budget control). The segment ends with its
// own run_finished.
func Continue(ctx context.Context, dir, followUp string, rc ResumeConfig) (Summary, error) {
	if strings.TrimSpace(followUp) == "" {
		return Summary{}, &ConfigError{"no follow-up: say what the run should do next"}
	}
	switch runview.Liveness(dir) {
	case runview.Live:
		return Summary{}, &ConfigError{fmt.Sprintf("run %s is live: send it the follow-up with apodex say", filepath.Base(dir))}
	case runview.Finished:
	default:
		return Summary{}, &ConfigError{fmt.Sprintf("run %s has not finished: apodex resume %s goes on with it (then continue it)", filepath.Base(dir), filepath.Base(dir))}
	}
	if _, err := inbox.Send(dir, inbox.SenderContinue, followUp); err != nil {
		return Summary{}, err
	}
	return resume(ctx, dir, rc, followUp)
}

func resume(ctx context.Context, dir string, rc ResumeConfig, followUp string) (Summary, error) {
	cfg := rc.Config
	cfg.Clock = clock.Or(cfg.Clock)
	reason := stoppedReason
	switch runview.Liveness(dir) {
	case runview.Finished:
		term, ok := ResumableEnd(dir)
		if followUp != "" {
			reason = "the run was continued with a follow-up (apodex continue) after it ended with " + term
			break
		}
		if !ok {
			return Summary{}, &ConfigError{fmt.Sprintf("run %s has finished (%s); there is nothing to resume", filepath.Base(dir), term)}
		}
		reason = "the run ended with " + term + "; resumed from the record"
	case runview.Live:
		return Summary{}, &ConfigError{fmt.Sprintf("run %s is live in another process; send it messages with apodex say, or pause/resume it", filepath.Base(dir))}
	}
	log, contents, repaired, err := record.Open(dir, cfg.Clock.Now)
	if err != nil {
		return Summary{}, err
	}
	if cfg.OnLog != nil {
		cfg.OnLog(log)
	}
	if n := len(contents.Events); n > 0 && reason == stoppedReason {
		p, _ := record.DecodePayload(contents.Events[n-1])
		if w, ok := p.(*record.Warning); ok && w.Code == "stopped" {
			reason = "the run was stopped (" + w.Message + "); resumed from the record"
		}
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
	kind, err := SandboxFor(rec.Started, rc.Sandbox)
	if err == nil {
		err = NetworkAllowFor(rec.Started, rc.NetworkAllow)
	}
	if err != nil {
		log.Close()
		return Summary{}, err
	}
	if cfg.MCP, err = resumedMCP(filepath.Base(dir), rec.Settings.MCP, cfg); err != nil {
		log.Close()
		return Summary{}, err
	}
	cfg.Settings = rec.Settings
	cfg.Sandbox = kind
	cfg.MaxAttempts = max(cfg.MaxAttempts, 1)
	if cfg.ModelInfo.Provider == "" {
		cfg.ModelInfo = rec.Started.Model
	}
	cfg.CorpusDir = "" // a corpus is in the run's inputs (Settings.Evidence.Corpus)
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
	fs := &workspace.FS{Inputs: filepath.Join(dir, "inputs"), Workspace: filepath.Join(dir, "workspace"), Outputs: filepath.Join(dir, "outputs"),
		Watch: watch.NewSet()} // the run's: its session closes it
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
		Reason: reason, Model: &cfg.ModelInfo, FollowUp: followUp,
	})
	log.Sync()
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "apodex: resuming run %s after event %d\n", ss.id, last)
	}
	ss.warnSandbox()
	return ss.run(ctx, &resumed{st: st, events: contents.Events, agents: agents, continued: followUp != ""})
}

const stoppedReason = "the process stopped without finishing (killed or crashed); resumed from the record"

// ResumableEnd reports how a finished run ended, and whether that end can
// be resumed: a model error (the endpoint failed, refused a request or was
// unreachable past the retries) or a budget hit leaves the run where it
// was (run_finished says stopped), so once the endpoint answers again (or
// with --base-url/--model), or with more budget, it goes on.
func ResumableEnd(dir string) (termination string, ok bool) {
	e, err := record.Last(dir)
	if err != nil {
		return "", false
	}
	p, _ := record.DecodePayload(e)
	rf, ok := p.(*record.RunFinished)
	if !ok {
		return "", false
	}
	return rf.Termination, rf.Status == StatusStopped || rf.Termination == string(agent.ModelError)
}

// stoppedEnd reports whether an agent's end leaves the run resumable:
// the endpoint failed past the retries, or a budget ran out.
func stoppedEnd(termination string) bool {
	switch agent.Termination(termination) {
	case agent.ModelError, agent.BudgetTurns, agent.BudgetToolCalls, agent.BudgetTokens:
		return true
	}
	return false
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
