package team

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
)

type addArgs struct {
	Title     string   `json:"title" desc:"Short name of the item."`
	Objective string   `json:"objective" desc:"The bounded, verifiable result this item must produce."`
	Deps      []string `json:"deps,omitempty" desc:"Items that must be resolved first: ids like T1, or the exact title of an item added earlier (in this reply too)."`
	Group     string   `json:"group,omitempty" desc:"Optional grouping label."`
}

type updateArgs struct {
	ID        string   `json:"id" desc:"The item (T1, T2, …)."`
	Title     string   `json:"title,omitempty" desc:"New title."`
	Objective string   `json:"objective,omitempty" desc:"New objective."`
	Deps      []string `json:"deps,omitempty" desc:"New dependency list (replaces the old one)."`
}

type resolveArgs struct {
	ID   string   `json:"id" desc:"The item."`
	Note string   `json:"note" desc:"Why it is resolved: what came back and how it was checked."`
	Refs []string `json:"refs,omitempty" desc:"Evidence or artifact refs (report:A1, file paths, evidence ids)."`
}

type reasonArgs struct {
	ID     string `json:"id" desc:"The item."`
	Reason string `json:"reason" desc:"Why."`
}

type noArgs struct{}

type dispatchArgs struct {
	Item         string   `json:"item" desc:"The board item to work on; its dependencies must be resolved."`
	Role         string   `json:"role" desc:"The specialist you are creating for this item, e.g. 'CSV analyst'."`
	Instructions string   `json:"instructions" desc:"What the subagent must do and deliver, written for this item."`
	Tools        []string `json:"tools,omitempty" desc:"Tools it may use (default: read_file, write_file, edit_file, list_files, grep, bash, claim_outputs, recall, search, fetch; MCP tools, mcp__SERVER__TOOL, only when named)."`
}

type markArgs struct {
	Claim  string `json:"claim" desc:"A ledger id (K3)."`
	Mark   string `json:"mark" desc:"One of side, load_bearing or withdrawn."`
	Reason string `json:"reason" desc:"Why, in one sentence."`
}

type cancelArgs struct {
	Assignment string `json:"assignment" desc:"The assignment id (A1, A2, …)."`
}

// LeadTools are the lead's coordination tools (SPEC §4). All but verify are
// serial: within a turn they apply in call order (a board_view or a wait
// after a board_add or a dispatch sees it), so ids and effects do not
// depend on scheduling.
func (t *Team) LeadTools() []tool.Tool {
	tools := []tool.Tool{
		tool.Define("board_add", "Add an item to the Task Board: a bounded, verifiable sub-objective. Returns its id. Ids are T1, T2, … in the order items are added, and the board_add calls of one reply are applied in call order, so a later one may depend on an earlier one of the same reply (by its id, or by its exact title).", 0,
			func(ctx context.Context, a addArgs) tool.Result {
				return t.boardOp(ctx, func(b *board.Board) (board.Event, error) {
					return b.Add("lead", a.Title, a.Objective, byTitle(b, a.Deps), a.Group)
				},
					func(e board.Event) string { return fmt.Sprintf("added %s", e.ID) })
			}),
		tool.Define("board_update", "Revise an open item's title, objective or dependencies.", 0,
			func(ctx context.Context, a updateArgs) tool.Result {
				var title, obj *string
				var deps *[]string
				if a.Title != "" {
					title = &a.Title
				}
				if a.Objective != "" {
					obj = &a.Objective
				}
				if a.Deps != nil {
					deps = &a.Deps
				}
				return t.boardOp(ctx, func(b *board.Board) (board.Event, error) { return b.Update("lead", a.ID, title, obj, deps) },
					func(e board.Event) string { return fmt.Sprintf("updated %s", e.ID) })
			}),
		tool.Define("board_resolve", "Mark an item resolved: your judgement that its result came back and was checked. Give the evidence.", 0,
			func(ctx context.Context, a resolveArgs) tool.Result {
				return t.boardOp(ctx, func(b *board.Board) (board.Event, error) { return b.Resolve("lead", a.ID, a.Note, a.Refs) },
					func(e board.Event) string {
						msg := fmt.Sprintf("resolved %s", e.ID)
						if un := t.board.Unlocked(e.ID); len(un) > 0 {
							msg += "; now ready: " + strings.Join(un, ", ")
						}
						return msg
					})
			}),
		tool.Define("board_cancel", "Cancel an item that is no longer needed.", 0,
			func(ctx context.Context, a reasonArgs) tool.Result {
				return t.boardOp(ctx, func(b *board.Board) (board.Event, error) { return b.Cancel("lead", a.ID, a.Reason) },
					func(e board.Event) string { return fmt.Sprintf("cancelled %s", e.ID) })
			}),
		tool.Define("board_reopen", "Reopen an item whose premise turned out wrong; only the items that depend on it are reopened with it.", 0,
			func(ctx context.Context, a reasonArgs) tool.Result {
				return t.boardOp(ctx, func(b *board.Board) (board.Event, error) { return b.Reopen("lead", a.ID, a.Reason) },
					func(e board.Event) string {
						if len(e.Reopened) == 0 {
							return fmt.Sprintf("reopened %s (no dependent item was affected)", e.ID)
						}
						return fmt.Sprintf("reopened %s and its dependents %s", e.ID, strings.Join(e.Reopened, ", "))
					})
			}),
		tool.Define("board_view", "Show the Task Board and the claim ledger (each reported claim's id, status and weight).", 0, func(context.Context, noArgs) tool.Result {
			var b strings.Builder
			t.mu.Lock()
			t.board.Render(&b)
			t.mu.Unlock()
			claim.RenderLedger(&b, t.ledger())
			return tool.Result{Output: b.String()}
		}),
		tool.Define("dispatch", "Start a subagent you design (role, instructions, tools) on a board item whose dependencies are resolved. Returns the assignment id; its report comes back through wait.", 0,
			func(ctx context.Context, a dispatchArgs) tool.Result {
				id, err := t.dispatch(ctx, a.Item, a.Role, a.Instructions, a.Tools)
				if err != nil {
					return tool.Errorf("dispatch refused: %v", err)
				}
				return tool.Result{Output: fmt.Sprintf("dispatched %s on %s; call wait to collect its report", id, strings.ToUpper(a.Item))}
			}),
		t.waitTool(),
		tool.Define("cancel_assignment", "Stop a queued or running assignment; its processes are killed.", 0,
			func(_ context.Context, a cancelArgs) tool.Result {
				if err := t.cancelAssignment(a.Assignment); err != nil {
					return tool.Errorf("%v", err)
				}
				return tool.Result{Output: fmt.Sprintf("cancelling %s; wait returns when it has stopped", strings.ToUpper(a.Assignment))}
			}),
		t.verifyTool(),
		tool.Define("mark_claim", "Set what a ledger claim weighs: side (the deliverables do not rest on it: not load-bearing, no effort), load_bearing, or withdrawn (it no longer counts).", 0,
			func(ctx context.Context, a markArgs) tool.Result {
				return t.markClaim(tool.CallID(ctx), a)
			}),
	}
	if !t.cfg.Plan {
		return serialAll(tools)
	}
	// Offered only while planning: outside planning mode it does not exist.
	tools = append(tools, tool.OfferedWhen(tool.Define("finish_planning", "Leave planning mode: dispatch, writes, shell and finish become available.", 0,
		func(context.Context, noArgs) tool.Result {
			t.mu.Lock()
			defer t.mu.Unlock()
			if !t.planning {
				return tool.Result{Output: "not in planning mode; nothing to do"}
			}
			if t.board.Len() == 0 {
				return tool.Errorf("the board is empty: add the plan's items with board_add before leaving planning mode")
			}
			t.planning = false
			t.record(record.TypePlanning, "lead", record.Planning{Mode: "planning", State: "finished"})
			return tool.Result{Output: "planning finished: dispatch the ready items"}
		}), t.inPlanning))
	return serialAll(tools)
}

// serialAll marks every tool but verify serial.
func serialAll(tools []tool.Tool) []tool.Tool {
	for i, tl := range tools {
		if tl.Spec().Name != "verify" {
			tools[i] = tool.Serial(tl)
		}
	}
	return tools
}

func (t *Team) inPlanning() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.planning
}

// byTitle replaces deps that name an item by its exact title with its id,
// so that items added in one reply can depend on each other by title.
func byTitle(b *board.Board, deps []string) []string {
	out := slices.Clone(deps)
	for i, d := range out {
		if _, err := b.Get(d); err == nil {
			continue
		}
		for _, it := range b.Items() {
			if it.Title == strings.TrimSpace(d) {
				out[i] = it.ID
				break
			}
		}
	}
	return out
}

// LeadToolNames names the lead's coordination tools in a run started in
// planning mode (plan) or not.
func LeadToolNames(plan bool) []string {
	var names []string
	for _, tl := range (&Team{cfg: Config{Plan: plan}}).LeadTools() {
		names = append(names, tl.Spec().Name)
	}
	return names
}

// boardOp runs a board command under the lock and records its event.
func (t *Team) boardOp(ctx context.Context, op func(*board.Board) (board.Event, error), ok func(board.Event) string) tool.Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.mutateFor(tool.CallID(ctx), "lead", op)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	// Reopened items lose their assignments: stop those still running.
	for _, id := range append([]string{e.ID}, e.Reopened...) {
		if e.Op != board.OpReopen {
			break
		}
		for _, aid := range t.order {
			if a := t.assignments[aid]; a.Item == id && (a.State == Queued || a.State == Running) {
				a.cancel(fmt.Errorf("%w: %s was reopened", errCancelled, id))
			}
		}
	}
	return tool.Result{Output: ok(e)}
}

// planningAllowed are the tools that work in planning mode (R-PLAN-1):
// read-only inspection and board operations.
var planningAllowed = []string{"read_file", "list_files", "grep", "recall", "verify", "mark_claim", "finish_planning",
	"board_add", "board_update", "board_resolve", "board_cancel", "board_reopen", "board_view"}

// Guard wraps the lead's tools so that, in planning mode, everything but
// inspection and board tools is refused with the reason.
func (t *Team) Guard(tools []tool.Tool) []tool.Tool {
	out := make([]tool.Tool, len(tools))
	for i, tl := range tools {
		if fam, ok := tool.MapFamily(tl, func(m tool.Tool) tool.Tool { return t.Guard([]tool.Tool{m})[0] }); ok {
			out[i] = fam // an MCP server's tools, guarded one by one
			continue
		}
		if slices.Contains(planningAllowed, tl.Spec().Name) {
			out[i] = tl
			continue
		}
		// Offered once planning is over; a call made in planning mode is
		// refused with the reason.
		out[i] = tool.OfferedWhen(guarded{Tool: tl, t: t}, func() bool { return !t.inPlanning() })
		if tool.IsSerial(tl) {
			out[i] = tool.Serial(out[i])
		}
	}
	return out
}

type guarded struct {
	tool.Tool
	t *Team
}

func (g guarded) Call(ctx context.Context, args json.RawMessage) tool.Result {
	g.t.mu.Lock()
	planning := g.t.planning
	g.t.mu.Unlock()
	if planning {
		return tool.Errorf("%s is refused in planning mode: until finish_planning only read-only inspection (read_file, list_files, grep) and board tools work", g.Spec().Name)
	}
	return g.Tool.Call(ctx, args)
}
