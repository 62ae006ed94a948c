package run

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/live"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run/evidenceplane"
	"github.com/apodex/apodex/internal/run/gate"
	"github.com/apodex/apodex/internal/run/stage"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/team"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/world"
)

// session is one run being executed in this process, started fresh or
// resumed: the record, the planes and the control plane around its agents.
type session struct {
	cfg     Config
	roll    *world.Rollout // a world run's rollout, else nil
	id, dir string
	fs      *workspace.FS
	log     *record.Log
	plane   *publish.Plane
	in      *inbox.Inbox
	kit     *toolkit
	ev      *evidenceplane.Plane
	c       *contract.Contract
	sbx     record.SandboxSettings
	warn    *record.Warning
	release func()
	mcpOn   bool      // the MCP servers were started (startMCP)
	start   time.Time // when this process took the run over
	began   time.Time // when the run first started (run_started)
}

// open prepares the planes, the publication plane, the sandbox and the
// message inbox of the run in dir, and takes its live lock.
func open(cfg Config, id, dir string, fs *workspace.FS, log *record.Log, c *contract.Contract) (*session, error) {
	release, err := lockLive(dir)
	if err != nil {
		return nil, err
	}
	ss := &session{cfg: cfg, id: id, dir: dir, fs: fs, log: log, c: c, release: release, start: cfg.Clock.Now(), began: cfg.Clock.Now()}
	ss.plane, err = publish.New(publish.Config{Outputs: fs.Outputs, Staging: filepath.Join(dir, "staging"), ScratchQuota: cfg.ScratchQuota, MaxPaths: c.DeliverableCap(), Watch: fs.Watch})
	if err != nil {
		release()
		return nil, fmt.Errorf("run: publication plane: %w", err)
	}
	ss.plane.OnEvent = func(ev publish.LeaseEvent) { appendEvent(log, record.TypeLease, ev.Agent, ev.Lease) }
	if ss.in, err = inbox.Open(dir); err != nil {
		release()
		return nil, fmt.Errorf("run: message inbox: %w", err)
	}
	allow, err := allowNets(cfg.Settings)
	if err != nil {
		release()
		return nil, err
	}
	runner, sbx, warn := chooseSandbox(cfg.Sandbox, cfg.Network, cfg.HostNetwork, allow, limitsOf(cfg.Limits))
	ss.sbx, ss.warn = sbx, warn
	if ss.ev, err = evidenceplane.Open(evidenceplane.Options{Clock: cfg.Clock, Network: cfg.Network, Evidence: cfg.Evidence, EvidenceFrom: cfg.EvidenceFrom, Home: cfg.Home}, dir, fs, log); err != nil {
		release()
		return nil, configErr(err)
	}
	ss.kit = &toolkit{fs: fs, plane: ss.plane, runner: runner, network: cfg.Network, commandTimeout: durationOf(cfg.CommandTimeout), ev: ss.ev}
	return ss, nil
}

func (ss *session) close() {
	ss.kit.hub.Close() // the MCP servers end with the run
	ss.ev.Close()
	_ = sandbox.Close(ss.kit.runner) // the live sandboxes end with the run
	// The run's planes, scratch and worktrees are watched no longer.
	ss.fs.Release()
	ss.fs.Watch.Close()
	ss.release()
}

// toolNames lists the coordinator's tools, for run_started.
func (ss *session) toolNames() []string {
	names := ss.kit.tools("x", ss.fs).With(agent.NewEvicted().Tool()).Names()
	names = append(names, gate.CheckDeliverables)
	if ss.cfg.Mode == ModeTeam {
		names = append(names, team.LeadToolNames(ss.cfg.Team.Plan)...)
	}
	return names
}

func (ss *session) warnSandbox() {
	if ss.warn == nil {
		return
	}
	ss.log.Append(record.TypeWarning, "", ss.warn)
	if ss.cfg.Progress != nil {
		fmt.Fprintf(ss.cfg.Progress, "WARNING: %s\n", ss.warn.Message)
	}
}

// resumed is what a resume hands to run: the rebuilt agents and the record.
type resumed struct {
	st     *runstate.State
	events []record.Event
	agents map[string]*checkpoint.Agent
	// continued: a finished run goes on with a follow-up (Continue), so
	// a finished coordinator works again.
	continued bool
}

// run drives the coordinator (and, in team mode, its subagents) to the end,
// then concludes: reconciliation, verification, run_finished.
func (ss *session) run(ctx context.Context, rs *resumed) (Summary, error) {
	cfg, log := ss.cfg, ss.log
	s := Summary{RunID: ss.id, RunDir: ss.dir, Sandbox: ss.sbx.Kind}
	if ss.warn != nil {
		s.Warnings = append(s.Warnings, ss.warn.Message)
	}
	ctx = llm.WithCaller(ctx, llm.Caller{Run: ss.id}) // every model call names its run
	ctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	ctl := live.New(live.Config{Inbox: ss.in, Log: log, Cancel: cancelRun, Clock: cfg.Clock, Budget: budgetOf(cfg.Budget), Contract: ss.c,
		Status: func() string { return runview.StatusText(ss.dir) }})
	elapsed := ss.start.Sub(ss.began) // time the run had already used before this process
	if timeout := durationOf(cfg.Timeout); timeout > 0 {
		ctl.SetTimeout(cfg.Clock.Now().Add(timeout - elapsed))
	}
	defer ctl.Stop()
	soft := durationOf(cfg.SoftDeadline)
	if soft > 0 {
		ctl.SetSoftDeadline(ss.start.Add(soft - elapsed))
	}
	if rs != nil {
		ctl.Replay(rs.st)
	}
	ss.ev.NoteIndex(log)
	if err := ss.startMCP(ctx, false); err != nil { // a resume's: a new run's started before run_started
		return s, err
	}
	go func() {
		select {
		case <-cfg.Halt:
			cancelRun(ErrHalted)
		case <-ctx.Done():
		}
	}()
	stopWatch := ctl.Watch(ctx)
	defer stopWatch()
	keep := keepView(ctx, ss.dir)
	defer keep.close()
	rt := agent.Runtime{Model: cfg.Model, Log: log, FS: ss.fs, Retry: retryOf(cfg.Settings), Context: contextOf(cfg.Context),
		OnStep: progress(cfg.Progress, cfg.Logger), Clock: cfg.Clock, RequireFinish: cfg.RequireFinish}
	spec := agent.Spec{ID: "main", Role: llm.CallerSingle, Budget: budgetOf(cfg.Budget), Adjust: ctl.Adjust, Recall: true}
	ins, err := LoadInstructions(ss.dir, cfg.Settings)
	if err != nil {
		return s, err
	}
	section := InstructionsSection(ins)
	var tm *team.Team
	if cfg.Mode == ModeTeam {
		tm = newTeam(ctx, cfg, rt, ss.kit, ss.dir, ctl, section)
		spec.ID, spec.Role, spec.Gate = "lead", llm.CallerLead, tm.Gate(ctx)
		spec.BeforeCall = both(ctl.BeforeCall("lead"), tm.BeforeCall)
		spec.Tools, spec.Guard, spec.Prompt = append(ss.kit.list("lead", ss.fs), tm.LeadTools()...), tm.Guard, tm.LeadSystem
	} else {
		spec.BeforeCall = ctl.BeforeCall("main")
		spec.Tools, spec.Prompt = ss.kit.list("main", ss.fs), agent.SystemPrompt
	}
	if section != "" {
		base := spec.Prompt
		spec.Prompt = func(set *tool.Set) string { return base(set) + section }
	}
	// The cheap checks before the final gate: a tool, and one repair turn.
	pc := &gate.Precheck{Ctl: ctl, Plane: ss.plane, Log: log, SandboxKind: ss.sbx.Kind, Team: tm != nil,
		Env:   verify.Env{Inputs: ss.fs.Inputs, Workspace: ss.fs.Workspace, Outputs: ss.fs.Outputs, Evidence: ss.ev.Registry()},
		Final: &verify.Env{Inputs: ss.fs.Inputs, Workspace: ss.fs.Workspace, Outputs: ss.fs.Outputs, Trace: ss.dir, Evidence: ss.ev.Registry(), Judge: judgeModel(cfg), Deliverables: gate.Deliverables(ctl.Current())}}
	if rs != nil {
		pc.Repaired = gate.RepairGiven(rs.events)
	}
	spec.Tools = append(spec.Tools, tool.Serial(pc.Tool())) // after the writes of its turn
	spec.Gate = pc.Gate(ctx, spec.Gate)
	if soft > 0 {
		// The salvage call gets a tenth of the soft budget, 5 s to 60 s.
		fin := min(max(soft/10, 5*time.Second), 60*time.Second)
		spec.Deadlines = agent.Deadlines{Soft: ctl.SoftDeadline(), WrapUp: soft / 10, Finalize: fin}
	}
	ac := rt.Assemble(spec)

	var out agent.Outcome
	done := false
	if rs != nil {
		cp := rs.agents[ac.ID]
		if tm != nil {
			if err := tm.Restore(ctx, ss.dir, rs.st, rs.events, rs.agents); err != nil {
				return s, fmt.Errorf("run: restore the team: %w", err)
			}
		}
		switch {
		case cp != nil && cp.Finished != nil && !rs.continued: // finish was accepted before the stop
			out, done = agent.Outcome{Termination: agent.Completed, Summary: *cp.Finished, Turns: cp.Turns, ToolCalls: cp.ToolCalls, Usage: cp.Usage}, true
		case cp != nil && cp.Turns > 0:
			ac.Restore = &agent.Restore{History: cp.History, Turns: cp.Turns, ToolCalls: cp.ToolCalls, Usage: cp.Usage}
		}
	}
	if !done {
		out = agent.Run(ctx, ac, taskMessage(ss.c)+ss.ev.TaskNote(ss.c))
	}
	if tm != nil {
		tm.Shutdown(string(out.Termination))
	}
	stopWatch()
	if errors.Is(context.Cause(ctx), ErrHalted) {
		if cfg.HaltNote != "" {
			appendEvent(log, record.TypeWarning, "", record.Warning{Code: "stopped", Message: cfg.HaltNote})
		}
		s.Status, s.Termination = StatusStopped, "stopped"
		err := log.Close()
		keep.close()                          // the end of the segment: summary and checkpoint
		return s, errors.Join(ErrHalted, err) // as a kill: no conclusion, no run_finished
	}
	ss.plane.Release(ac.ID, string(out.Termination))
	// Every agent has stopped: no atomic write is in flight, so a runtime
	// temporary file left in a plane (one a stop cut off and something
	// rewrote after resume's sweep) is garbage, never a deliverable.
	for _, plane := range []string{ss.fs.Workspace, ss.fs.Outputs} {
		for _, p := range workspace.RemoveTempsIn(ss.fs.Watch, plane) { // from the planes' trees: no walk
			appendEvent(log, record.TypeWarning, "", record.Warning{Code: "temp", Message: "removed a leftover runtime temporary file: " + p})
		}
	}

	s.Termination = string(out.Termination)
	s.Summary, s.Partial = out.Summary, out.Partial
	if out.Err != nil {
		s.Error = out.Err.Error()
	}
	refused := worldRefused(ss.roll, log) // waits for the seal check Stage began
	v := gate.Conclude(context.WithoutCancel(ctx), ctl.Current(), ss.plane, log,
		verify.Env{Inputs: ss.fs.Inputs, Workspace: ss.fs.Workspace, Outputs: ss.fs.Outputs, Trace: ss.dir, Evidence: ss.ev.Registry(),
			Judge: judgeModel(cfg), Deliverables: gate.Deliverables(ctl.Current())}, s.Sandbox, pc.Kept())
	v.Failures = append(refused, v.Failures...) // a world changed in the store fails the gate
	settle(&s, v)
	if tm != nil {
		synthesisFailed(&s, tm.SynthesisFailures())
	}
	var stored func(watch.File) bool // a world's untouched files are its manifest's, not listed
	if ss.roll != nil {
		stored = ss.roll.Stored
	}
	s.Files, s.FilesOmitted, s.WorldFiles = stage.ProducedFiles(ss.fs, stored)
	// The kernel's teardown of inotify watches waits out an RCU grace
	// period (10-20 ms on this machine); done here, it runs while the
	// record is closed and the summary printed, instead of delaying the
	// process's exit. The planes are not looked at again.
	ss.fs.Watch.Close()
	if ss.cfg.ReleaseWorld && ss.roll != nil {
		big := len(ss.roll.World.Files) >= 10_000
		ss.roll.Release() // Finish needs neither its list nor its seal
		if big {
			// The heap's goal was set while the list was live (twice
			// its 12 MB at 100,000 files): collected now, its memory
			// serves the end's allocations instead of the heap growing
			// past it. One collection of what is left (a few MB).
			runtime.GC()
		}
	}
	// The run's own projection (keepView) serves the totals and, refreshed
	// with the run_finished event, the trainability: the record is not
	// read again, only the events since the keeper's last look.
	folded := keep.state()
	s.Turns, s.ToolCalls, s.Usage = totals(folded, out, tm != nil)
	_, ferr := log.Append(record.TypeRunFinished, "", record.RunFinished{
		Termination: s.Termination, Status: s.Status, Summary: s.Summary, Partial: s.Partial, Error: s.Error,
		Turns: s.Turns, ToolCalls: s.ToolCalls, Usage: s.Usage, Files: s.Files, FilesOmitted: s.FilesOmitted, WorldFiles: s.WorldFiles, Failures: s.Failures,
		DurationMS: cfg.Clock.Now().Sub(ss.began).Milliseconds(), Time: cfg.Clock.Now(),
	})
	if err := errors.Join(ferr, log.Close()); err != nil {
		return s, fmt.Errorf("run: close the record: %w", err)
	}
	ss.finishWorld(&s)
	if folded = keep.close(); folded != nil {
		s.Trainable, s.NotTrainable = runview.TrainabilityWith(folded, ss.stagedWorld())
	} else {
		s.Trainable, s.NotTrainable = runview.Trainability(ss.dir)
	}
	return s, nil
}

// judgeModel is the rubric judge: the run's model, retried as the agents'
// calls are; nil when the run has none.
func judgeModel(cfg Config) llm.Model {
	if cfg.Model == nil {
		return nil
	}
	return llm.WithRetry(cfg.Model, retryOf(cfg.Settings))
}

// finishWorld finishes a world run's rollout (Rollout.Finish: the
// terminal workspace kept) once its record is closed, before the summary
// and checkpoint are written: what Finish holds (a released world's
// workspace paths) is gone before they are.
func (ss *session) finishWorld(s *Summary) {
	if ss.roll == nil {
		return
	}
	if err := ss.roll.Finish(); err != nil {
		s.Warnings = append(s.Warnings, "the rollout's workspace was not kept: "+err.Error())
	}
}

// stagedWorld is the world the run staged and its rollout's Intact, for
// trainability; nil for a run of no world.
func (ss *session) stagedWorld() *runview.Staged {
	if ss.roll == nil {
		return nil
	}
	return &runview.Staged{World: ss.roll.World, Intact: ss.roll.Intact()}
}
