package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
)

// Assignment states (R-EXEC-1), as recorded.
const (
	Created   = record.AssignmentCreated
	Queued    = record.AssignmentQueued
	Running   = record.AssignmentRunning
	Reported  = record.AssignmentReported
	Failed    = record.AssignmentFailed
	Cancelled = record.AssignmentCancelled
	Timeout   = record.AssignmentTimeout
)

// Assignment is one dispatched subagent.
type Assignment struct {
	ID           string   `json:"id"`
	Item         string   `json:"item"`
	Role         string   `json:"role"`
	Instructions string   `json:"instructions"`
	Tools        []string `json:"tools"`
	State        string   `json:"state"`
	Reason       string   `json:"reason,omitempty"`
	Report       *Report  `json:"report,omitempty"`
	// ClaimIDs are the ledger ids of its report's claims, in order.
	ClaimIDs []string `json:"claim_ids,omitempty"`

	cancel   context.CancelCauseFunc
	worktree string // its worktree's name (the id, or a fresh name after a resume)
	// keep are the verified claims a revision of a reopened item must
	// restate (claim.Kept), and revision what its task says of them.
	keep     []claims.Claim
	revision string
}

// subagentTools are the tools a lead may give a subagent.
var subagentTools = []string{"read_file", "write_file", "edit_file", "list_files", "grep", "bash", "claim_outputs", "recall", "search", "fetch"}

// dispatch validates and queues an assignment; it returns the assignment id.
func (t *Team) dispatch(ctx context.Context, item, role, instructions string, tools []string) (string, error) {
	callID := tool.CallID(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.planning {
		return "", errors.New("dispatch is refused in planning mode: finish the plan on the board, then call finish_planning")
	}
	if strings.TrimSpace(role) == "" || strings.TrimSpace(instructions) == "" {
		return "", errors.New("give the subagent a role and instructions written for this item")
	}
	it, err := t.board.Get(item)
	if err != nil {
		return "", err
	}
	if err := t.board.Ready(it.ID); err != nil {
		return "", err
	}
	if len(tools) == 0 {
		tools = subagentTools
	}
	var more []string
	if t.cfg.MoreTools != nil {
		more = t.cfg.MoreTools()
	}
	for _, name := range tools {
		if !slices.Contains(subagentTools, name) && !slices.Contains(more, name) {
			return "", fmt.Errorf("tool %q cannot be given to a subagent; choose among %s", name, strings.Join(append(slices.Clone(subagentTools), more...), ", "))
		}
	}
	id := fmt.Sprintf("A%d", len(t.order)+1)
	if it.State != board.Open && it.State != board.InProgress {
		return "", fmt.Errorf("%s is %s; reopen it first", it.ID, it.State)
	}
	a := &Assignment{ID: id, Item: it.ID, Role: role, Instructions: instructions, Tools: tools, State: Created}
	t.assignments[id] = a
	t.order = append(t.order, id)
	t.dispatched++
	// The assignment is recorded first: a stop right after it leaves a known
	// assignment (Restore puts it on the board and starts it), never an owner
	// on the board that no assignment explains.
	t.record(record.TypeAssignment, "lead", record.Assignment{Assignment: id, Item: it.ID, Role: role, Instructions: instructions, Tools: tools, State: Created, CallID: callID})
	t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Assign(it.ID, id) })
	t.setState(a, Queued, "")
	actx := t.assignmentContext(ctx, a)
	t.revise(a)
	task := t.firstMessage(a, it)
	t.wg.Add(1)
	go t.executeFrom(actx, a, t.slots.ticket(), task, nil, nil, nil)
	return id, nil
}

// setState records a state change; the caller holds t.mu.
func (t *Team) setState(a *Assignment, state, reason string) {
	a.State, a.Reason = state, reason
	t.record(record.TypeAssignment, a.ID, record.Assignment{Assignment: a.ID, Item: a.Item, State: state, Reason: reason})
}

// executeFrom runs one assignment to its end; restore, when set, continues
// it from a checkpoint; finished, when set, is the report it had already
// made (only its merge and end remain); prepare fills its fresh workspace
// first.
func (t *Team) executeFrom(ctx context.Context, a *Assignment, ticket chan struct{}, task string, restore *agent.Restore, finished *Report, prepare func(dir string) error) {
	defer t.wg.Done()
	defer a.cancel(nil)
	select {
	case <-ticket:
	case <-ctx.Done():
		t.slots.abandon(ticket)
		t.end(a, nil, Cancelled, context.Cause(ctx).Error(), "")
		return
	}
	defer t.slots.release()

	fs, wt, err := t.subFS(a.ID, cmp.Or(a.worktree, a.ID))
	if fs != nil {
		defer fs.Release() // its index and watch subscriptions end with it
	}
	if err == nil && prepare != nil && wt != nil {
		err = prepare(wt.dir())
	}
	if err != nil {
		if wt != nil {
			wt.wt.Close() // a refused replay must not leave its view mounted
		}
		t.end(a, nil, Failed, "cannot prepare its workspace: "+err.Error(), "")
		return
	}
	t.mu.Lock()
	t.setState(a, Running, "")
	t.mu.Unlock()

	rep := &claim.ReportBox{}
	if finished != nil {
		rep.Set(finished)
		if t.cfg.Release != nil {
			t.cfg.Release(a.ID, string(agent.Completed))
		}
		merge := ""
		if wt != nil {
			merge = t.mergeAndClose(a, wt)
		}
		t.end(a, finished, Reported, "", merge)
		return
	}
	std := t.cfg.Tools(a.ID, fs)
	var tools []tool.Tool
	for _, name := range a.Tools {
		if tl, ok := std.Get(name); ok {
			tools = append(tools, tl)
		}
	}
	check := t.checker.ClaimRefs(fs)
	if keep := a.keep; len(keep) > 0 {
		refs := check
		check = func(r *Report) error {
			if err := refs(r); err != nil {
				return err
			}
			return claim.CheckRevision(keep, r)
		}
	}
	tools = append(tools, claim.NewReportTool(rep, fs, check))
	if t.cfg.SubTimeout > 0 { // on the team's clock
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		timer := t.cfg.Clock.AfterFunc(t.cfg.SubTimeout, func() { cancel(errTimeout) })
		defer timer.Stop()
	}
	out := agent.Run(ctx, t.runtime(fs).Assemble(agent.Spec{
		ID: a.ID, Role: llm.CallerSubagent, FinishTool: "report", Tools: tools,
		// With compaction on, recall is given here (not by the loop) so the
		// prompt lists exactly the tools the subagent has.
		Recall: t.cfg.Context.Window > 0,
		Prompt: func(set *tool.Set) string { return t.subagentPrompt(a.Role, set) },
		Budget: t.cfg.SubBudget, BeforeCall: t.cfg.SubBeforeCall, Restore: restore,
	}), task)
	if t.cfg.Release != nil {
		t.cfg.Release(a.ID, string(out.Termination))
	}
	merge := ""
	if wt != nil {
		merge = t.mergeAndClose(a, wt)
	}
	if out.Termination == agent.Completed && rep.Get() == nil && out.Summary != "" {
		// A tool-free answer taken as finish: its text is the report.
		rep.Set(&Report{Summary: out.Summary})
	}
	switch cause := context.Cause(ctx); {
	case out.Termination == agent.Completed && rep.Get() != nil:
		t.end(a, rep.Get(), Reported, "", merge)
	case errors.Is(cause, errTimeout):
		t.end(a, nil, Timeout, fmt.Sprintf("ran past its time budget of %s", t.cfg.SubTimeout), merge)
	case errors.Is(cause, errCancelled) || errors.Is(cause, ErrLeadDone) || out.Termination == agent.Cancelled:
		t.end(a, nil, Cancelled, fmt.Sprint(cause), merge)
	default:
		reason := string(out.Termination)
		if out.Err != nil {
			reason += ": " + out.Err.Error()
		}
		t.end(a, nil, Failed, reason, merge)
	}
}

var errTimeout = errors.New("team: assignment time budget reached")

// end records the assignment's last state, attaches a report to its item
// and leaves a notice for the lead.
func (t *Team) end(a *Assignment, rep *Report, state, reason, merge string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a.Report = rep
	if rep != nil {
		t.record(record.TypeReport, a.ID, record.Report{Assignment: a.ID, Item: a.Item, ReportBody: *rep})
		a.ClaimIDs = t.recordClaims(a.ID, a.ID, a.Item, rep)
		for _, v := range claim.Carried(a.keep, rep, a.ClaimIDs, a.Item) {
			t.record(record.TypeVerdict, "runtime", v) // a verified claim restated unchanged
		}
		t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Attach(a.Item, []string{"report:" + a.ID}) })
	}
	t.setState(a, state, reason)
	if it, err := t.board.Get(a.Item); err == nil && slices.Contains(it.Owners, a.ID) {
		t.mutate("runtime", func(b *board.Board) (board.Event, error) { return b.Unassign(a.Item, a.ID) })
	}
	if t.leadGone && state == Cancelled {
		return // the lead is gone: nobody to tell
	}
	t.notify(a, rep, state, reason, merge)
}

// cancelAssignment stops one assignment.
func (t *Team) cancelAssignment(id string) error {
	t.mu.Lock()
	a, ok := t.assignments[strings.ToUpper(strings.TrimSpace(id))]
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("no assignment %q; assignments are named A1, A2, … by dispatch", id)
	}
	switch a.State {
	case Reported, Failed, Cancelled, Timeout:
		return fmt.Errorf("assignment %s already ended (%s)", a.ID, a.State)
	}
	a.cancel(errCancelled)
	return nil
}

// revise makes a a revision when its item has claims from before (it
// was reopened): the verified ones it keeps, and its task's note of what
// it keeps and redoes. The caller holds t.mu.
func (t *Team) revise(a *Assignment) {
	if !slices.ContainsFunc(t.claims, func(k record.Claim) bool { return k.Item == a.Item }) {
		return
	}
	l := t.ledger()
	a.keep = claim.Kept(l, a.Item)
	a.revision = claim.RevisionNote(a.Item, a.keep, claim.Redo(l, a.Item, a.keep))
}

// firstMessage is a subagent's task: its item, the reports of the items it
// depends on, and the constraints it works under.
func (t *Team) firstMessage(a *Assignment, it board.Item) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, assignment %s on board item %s: %s\n\nObjective: %s\n", a.Role, a.ID, it.ID, it.Title, it.Objective)
	fmt.Fprintf(&b, "\nInstructions from the lead:\n%s\n", a.Instructions)
	for _, dep := range it.Deps {
		for _, id := range t.order {
			d := t.assignments[id]
			if d.Item == dep && d.Report != nil {
				fmt.Fprintf(&b, "\nReport of %s on %s (a dependency):\n%s\n", d.ID, dep, renderReport(d.Report, d.ClaimIDs))
			}
		}
	}
	b.WriteString(a.revision)
	if t.cfg.Isolation == Shared {
		fmt.Fprintf(&b, "\nThe workspace is shared: write only under /workspace/%s/; the other agents' directories are readable.\n", a.ID)
	}
	return b.String()
}

// worktreeHandle wraps a per-agent worktree.
type worktreeHandle struct{ wt *worktree.Worktree }

func openWorktree(m *worktree.Manager, shared, root, name string, ignore []string) (*worktreeHandle, error) {
	wt, err := m.Create(shared, root, name)
	if err != nil {
		return nil, err
	}
	if ignore != nil {
		wt.Ignore = ignore
	}
	return &worktreeHandle{wt: wt}, nil
}

func (h *worktreeHandle) dir() string { return h.wt.Dir }

// mergeAndClose merges the agent's changes into the shared workspace,
// records them (a merge event, and a file_delta per applied change) and says
// what happened.
func (t *Team) mergeAndClose(a *Assignment, h *worktreeHandle) string {
	defer h.wt.Close()
	rep, err := h.wt.Merge()
	if err != nil {
		t.record(record.TypeMerge, a.ID, record.Merge{Assignment: a.ID, Error: err.Error()})
		return "merge failed: " + err.Error()
	}
	t.record(record.TypeMerge, a.ID, mergeEvent(a.ID, rep))
	for _, c := range rep.Applied {
		d := record.FileDelta{CallID: "merge:" + a.ID, Path: "/workspace/" + c.Path}
		if c.Kind != worktree.Deleted {
			d.After = c.Hash
			if p, err := t.cfg.FS.Resolve(d.Path); err == nil {
				if _, n, err := workspace.HashFile(p.Host); err == nil {
					d.Bytes = n
				}
			}
		}
		t.record(record.TypeFileDelta, a.ID, d)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "merged %d change(s) into the shared workspace", len(rep.Applied))
	if n := len(rep.Ignored); n > 0 {
		fmt.Fprintf(&b, "; left out %d ignored path(s) (%s)", n, strings.Join(rep.Ignored[:min(n, 5)], ", "))
	}
	for _, c := range rep.Conflicts {
		fmt.Fprintf(&b, "; CONFLICT %s: %s (the shared version was kept; this agent's version is set aside in the run directory)", c.Path, c.Reason)
	}
	for _, r := range rep.Refused {
		fmt.Fprintf(&b, "; refused %s: %s", r.Path, r.Reason)
	}
	return b.String()
}

// mergeEvent is the record of a merge report.
func mergeEvent(id string, rep worktree.MergeReport) record.Merge {
	m := record.Merge{Assignment: id}
	for _, c := range rep.Applied {
		m.Applied = append(m.Applied, record.MergeChange{Path: c.Path, Kind: c.Kind, Hash: c.Hash, Target: c.Target})
	}
	for _, c := range rep.Conflicts {
		m.Conflicts = append(m.Conflicts, record.MergeConflict{Path: c.Path, Reason: c.Reason, TheirsHash: c.TheirsHash, OursHash: c.OursHash, Copy: c.Copy})
	}
	for _, r := range rep.Refused {
		m.Refused = append(m.Refused, record.MergeRefusal{Path: r.Path, Target: r.Target, Reason: r.Reason})
	}
	m.Ignored = rep.Ignored
	return m
}

// runtime is what the team's subagents share, for agent.Assemble; fs is
// the subagent's own view of the planes.
func (t *Team) runtime(fs *workspace.FS) agent.Runtime {
	return agent.Runtime{Model: t.cfg.Model, Log: t.cfg.Log, FS: fs, Retry: t.cfg.Retry, Context: t.cfg.Context,
		OnStep: t.cfg.OnStep, Clock: t.cfg.Clock, RequireFinish: t.cfg.RequireFinish}
}
