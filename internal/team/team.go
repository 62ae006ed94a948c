// Package team is the Agent Team (SPEC §6–8): a lead that plans on the Task
// Board, dispatches subagents it designs on demand, waits for their reports
// and judges what is resolved. It holds the lead's tools, dispatch, wait
// and restore; the claims the reports state are checked by package
// verify/claim (refs, the verifier, effort, revisions) and the report
// deliverables written by package synth. The team keeps no context: each
// assignment's comes from the call that starts it, and the run's context
// ending stops them as Shutdown does.
//
// Guarantees:
//   - every board mutation and assignment state change is recorded as a
//     `board` / `assignment` event, in the order it was applied (one lock
//     covers a mutation and its recording), so the board is a fold over the
//     record;
//   - an assignment moves created → queued → running → reported, or ends
//     failed, cancelled or timeout with a reason; at most Concurrency run at
//     once and queued ones start, in dispatch order, as slots free;
//   - a report never resolves its item: it is attached (a ref) and handed to
//     the lead, which alone resolves (R-BOARD-5);
//   - notices to the lead (reports, failures, merge conflicts) are delivered
//     exactly once: through wait, or before the lead's next model call, as
//     protected runtime observations that compaction never evicts;
//   - per-agent isolation gives each subagent a copy-on-write worktree that
//     is merged into the shared workspace when it ends; conflicts are
//     reported to the lead, never overwritten; shared isolation confines each
//     subagent's writes to /workspace/<agent-id>/;
//   - when the lead stops, every assignment still queued or running is
//     cancelled (its sandbox processes killed) and waited for;
//   - a dispatch on an item that already has claims (a reopened one) is a
//     revision: its report is refused while it drops or rewrites one of the
//     item's verified claims, and a verified claim restated unchanged with
//     immutable evidence keeps its verdict.
package team

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/synth"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
)

// Isolation backends (R-PLANE-2).
const (
	PerAgent = "per-agent"
	Shared   = "shared"
)

// ErrLeadDone is the cause that stops assignments when the lead ends.
var ErrLeadDone = errors.New(record.ReasonLeadDone)

// errCancelled is the cause of cancel_assignment.
var errCancelled = errors.New("team: cancelled by the lead")

// Config is a team's settings. Model, Log, FS and Tools are required.
type Config struct {
	Model llm.Model
	Log   *record.Log
	// FS is the shared planes; subagents get views of it.
	FS *workspace.FS
	// Evidence is the run's Q: claims and verify refs cite its ids.
	Evidence *evidence.Registry
	// ProjectInstructions ends every subagent's system prompt (the run's
	// marked section of AGENTS.md and the like; "" for none).
	ProjectInstructions string
	// Tools builds a subagent's standard tools over its planes.
	Tools func(agentID string, fs *workspace.FS) *tool.Set
	// MoreTools, if set, names further tools of Tools' set the lead may
	// hand a subagent by name in dispatch (the run's MCP tools); they are
	// never given by default.
	MoreTools func() []string
	// Release ends whatever the agent held (its publishing lease).
	Release func(agentID, reason string)
	// Isolation is PerAgent (default) or Shared.
	Isolation string
	// WorktreeRoot holds per-agent worktrees (inside the run directory).
	WorktreeRoot string
	// Worktrees makes them (the run's); nil: a Manager watching in FS's Set.
	Worktrees *worktree.Manager
	// MergeIgnore are the patterns of changes a per-agent merge leaves out
	// (worktree.Ignore); nil means worktree.DefaultIgnore.
	MergeIgnore []string
	// Concurrency bounds running assignments (default 8).
	Concurrency int
	// SubBudget and SubTimeout bound each assignment.
	SubBudget  agent.Budget
	SubTimeout time.Duration
	Retry      llm.RetryPolicy
	Context    agent.Context
	// Plan starts the lead in planning mode (R-PLAN-1).
	Plan bool
	// RequireFinish makes subagents end only by calling report (no
	// tool-free answer is taken as their report).
	RequireFinish bool
	OnStep        func(agent.Step)
	// Wake, if set, wakes a lead blocked in wait (a user message arrived);
	// the channel must stop when ctx ends.
	Wake func(ctx context.Context) <-chan struct{}
	// SubBeforeCall, if set, runs before every subagent model call (the
	// run's pause gate).
	SubBeforeCall func(ctx context.Context) []llm.Message
	// VerifierTools, if set, builds the verifier's read-only tools
	// (read_file, grep, list_files, search, fetch, and bash with every
	// plane read-only); the verdict tool is added to them.
	VerifierTools func(agentID string) []tool.Tool
	// VerifyMaxTurns bounds each verifier's model calls (default 6).
	VerifyMaxTurns int
	// Effort is EffortAdaptive or EffortOff (""); EffortWidth investigators
	// (default 2) per claim, at most EffortWaves waves (default 2).
	Effort                   string
	EffortWidth, EffortWaves int
	// EffortBudget is effort's share of the run's tokens so far, in
	// percent: a wave starts only while effort's agents spent less, and
	// each of its agents gets an equal part of what is left (0: 25; < 0:
	// unbounded).
	EffortBudget int
	// Synthesis, when set and Reports is not empty, has a writer write the
	// report deliverables Reports from the claim–evidence graph once finish
	// is accepted (package synth); Contract is the contract as the writer
	// reads it.
	Synthesis bool
	Reports   []string
	Contract  string
	// Deliverables are the contract's deliverable paths: the ledger's
	// load-bearing claims are those they rest on (none: every file under
	// /outputs).
	Deliverables []string
	// Clock is the team's time: the wait tool's timeout, and the clock of
	// every agent it starts; nil is the system clock.
	Clock clock.Clock
}

// What a zero field of Config means; run.Defaults gives every run these
// values explicitly (DefaultVerifyMaxTurns is the verifier's).
const (
	DefaultConcurrency = 8
	DefaultSubMaxTurns = 30
	DefaultEffortWidth = 2
	DefaultEffortWaves = 2
	// The verifier's and effort's, which live in package verify/claim.
	DefaultVerifyMaxTurns = claim.DefaultVerifyMaxTurns
	DefaultEffortBudget   = claim.DefaultEffortBudget
	EffortAdaptive        = claim.EffortAdaptive
	EffortOff             = claim.EffortOff
)

// Team is one run's coordination plane: the board and the assignments.
type Team struct {
	cfg Config

	mu          sync.Mutex
	board       *board.Board
	assignments map[string]*Assignment
	order       []string
	notices     []notice
	changed     chan struct{} // closed and replaced when a notice arrives
	planning    bool
	dispatched  int
	verified    int
	claims      []record.Claim // the ledger's claims, K1… in record order
	ids         agentIDs       // the runtime's agents: V1…, I1…, W1…
	// stopped is why every assignment must end (the lead is done, or the
	// run's context ended); an assignment started after it is stopped at
	// once.
	stopped error
	// leadGone: the lead is done or the run was cancelled, so nobody hears
	// of a cancelled assignment any more.
	leadGone bool

	checker *claim.Checker // the verifier and effort (package verify/claim)
	writer  *synth.Writer  // synthesis (package synth)
	// runState is the run's state kept in step with the log, shared with the
	// checker and the writer.
	runState *claim.State

	slots   *slots
	wg      sync.WaitGroup
	unwatch func() bool // stops watching the run's context
}

// New makes a team; the end of ctx stops every assignment (with ctx's
// cause), as Shutdown does. ctx is not kept: each assignment's context
// comes from the call that starts it.
func New(ctx context.Context, cfg Config) *Team {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Isolation == "" {
		cfg.Isolation = PerAgent
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Worktrees == nil && cfg.FS != nil {
		cfg.Worktrees = worktree.NewManager(cfg.FS.Trees())
	}
	if cfg.EffortWidth <= 0 {
		cfg.EffortWidth = DefaultEffortWidth
	}
	if cfg.EffortWaves == 0 {
		cfg.EffortWaves = DefaultEffortWaves
	}
	if cfg.SubBudget.MaxTurns == 0 {
		cfg.SubBudget.MaxTurns = DefaultSubMaxTurns
	}
	t := &Team{cfg: cfg, board: &board.Board{}, assignments: map[string]*Assignment{},
		changed: make(chan struct{}), planning: cfg.Plan, slots: newSlots(cfg.Concurrency)}
	h := host{t}
	t.runState = claim.NewState(cfg.Log)
	t.checker = claim.New(claim.Config{Model: cfg.Model, Log: cfg.Log, State: t.runState, FS: cfg.FS, Evidence: cfg.Evidence,
		VerifierTools: cfg.VerifierTools, VerifyMaxTurns: cfg.VerifyMaxTurns, SubBudget: cfg.SubBudget,
		Retry: cfg.Retry, Clock: cfg.Clock, BeforeCall: cfg.SubBeforeCall, OnStep: cfg.OnStep, Concurrency: cfg.Concurrency,
		Effort: cfg.Effort, EffortWidth: cfg.EffortWidth, EffortWaves: cfg.EffortWaves, EffortBudget: cfg.EffortBudget}, h)
	t.writer = synth.New(synth.Config{Model: cfg.Model, Log: cfg.Log, State: t.runState, FS: cfg.FS, Evidence: cfg.Evidence, Tools: cfg.Tools,
		Release: cfg.Release, Budget: cfg.SubBudget, Retry: cfg.Retry, Clock: cfg.Clock, BeforeCall: cfg.SubBeforeCall,
		OnStep: cfg.OnStep, Synthesis: cfg.Synthesis, Reports: cfg.Reports, Contract: cfg.Contract, Deliverables: cfg.Deliverables}, h, t.checker)
	t.unwatch = context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopAll(context.Cause(ctx), errors.Is(ctx.Err(), context.Canceled))
	})
	if cfg.Plan {
		t.record(record.TypePlanning, "lead", record.Planning{Mode: "planning", State: "started"})
	}
	return t
}

// Shutdown cancels every assignment still queued or running and waits for
// them to end.
func (t *Team) Shutdown(reason string) {
	t.unwatch()
	t.mu.Lock()
	t.stopAll(fmt.Errorf("%w: %s", ErrLeadDone, reason), true)
	t.mu.Unlock()
	t.wg.Wait()
}

// stopAll cancels every assignment with cause; the first cause stays.
// The caller holds t.mu.
func (t *Team) stopAll(cause error, leadGone bool) {
	if t.stopped != nil {
		return
	}
	t.stopped, t.leadGone = cause, leadGone
	for _, id := range t.order {
		if a := t.assignments[id]; a.cancel != nil {
			a.cancel(cause)
		}
	}
}

// assignmentContext is the context of an assignment started by a call
// with ctx: ctx's values, but it ends only by its own cancel or stopAll
// (not when the lead's turn or loop ends). The caller holds t.mu.
func (t *Team) assignmentContext(ctx context.Context, a *Assignment) context.Context {
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	a.cancel = cancel
	if t.stopped != nil {
		cancel(t.stopped)
	}
	return actx
}

// SynthesisFailures are the citation failures of the reports the writer
// wrote, as they stand now (the lead may have repaired them since), each
// with its line; delivery fails when there are any.
func (t *Team) SynthesisFailures() []string { return t.writer.Failures() }

// Board returns a copy of the board's items, for display.
func (t *Team) Board() []board.Item {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.board.Items()
}

// record appends an event; callers that mutate state hold t.mu so the
// record's order is the order of application.
func (t *Team) record(typ, agentID string, payload any) {
	t.cfg.Log.Append(typ, agentID, payload)
}

// mutate runs a board command and records the event it produced; t.mu is
// held, so the record's order is the order of application.
func (t *Team) mutate(by string, op func(*board.Board) (board.Event, error)) (board.Event, error) {
	return t.mutateFor("", by, op)
}

// mutateFor is mutate for a tool call: the event names the call, so a
// resumed run knows the call took effect even if its result was lost.
func (t *Team) mutateFor(callID, by string, op func(*board.Board) (board.Event, error)) (board.Event, error) {
	e, err := op(t.board)
	if err != nil {
		return e, err
	}
	rec := e
	rec.CallID = callID
	t.record(record.TypeBoard, by, rec)
	return e, nil
}

func (t *Team) gateBoard() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var missing []string
	if t.planning {
		missing = append(missing, "you are still in planning mode: call finish_planning, dispatch the work and verify it")
	}
	for _, it := range t.board.Active() {
		missing = append(missing, fmt.Sprintf("%s %q is %s", it.ID, it.Title, it.State))
	}
	if t.cfg.Plan && t.dispatched == 0 {
		missing = append(missing, "no branch was delegated: dispatch at least one subagent")
	}
	if t.cfg.Plan && t.verified == 0 {
		missing = append(missing, "no claim was independently verified: call verify at least once")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("not done yet: %s. Resolve (with evidence) or cancel every active item, then finish", joinSemi(missing))
}

// subFS returns the planes a subagent works on, and a cleanup.
func (t *Team) subFS(id, worktreeName string) (*workspace.FS, *worktreeHandle, error) {
	shared := t.cfg.FS
	switch t.cfg.Isolation {
	case Shared:
		if err := os.MkdirAll(filepath.Join(shared.Workspace, id), 0o755); err != nil {
			return nil, nil, err
		}
		fs := shared.View(nil)
		fs.Own = id
		return fs, nil, nil
	default:
		wt, err := openWorktree(t.cfg.Worktrees, shared.Workspace, t.cfg.WorktreeRoot, worktreeName, t.cfg.MergeIgnore)
		if err != nil {
			return nil, nil, err
		}
		fs := &workspace.FS{Inputs: shared.Inputs, Workspace: wt.dir(), Outputs: shared.Outputs, Shared: shared.Workspace, Watch: shared.Trees()}
		return fs, wt, nil
	}
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
