package team

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// notice is something the lead must hear about: an assignment ended.
type notice struct {
	Assignment string
	Text       string
}

// notify queues a notice and wakes a lead blocked in wait; t.mu is held.
func (t *Team) notify(a *Assignment, rep *Report, state, reason, merge string) {
	var b strings.Builder
	fmt.Fprintf(&b, "Assignment %s (%s) on %s ended: %s", a.ID, a.Role, a.Item, state)
	if reason != "" {
		fmt.Fprintf(&b, " (%s)", reason)
	}
	b.WriteString(".\n")
	if rep != nil {
		b.WriteString(renderReport(rep, a.ClaimIDs))
		b.WriteString("\n")
	}
	if merge != "" {
		fmt.Fprintf(&b, "Workspace: %s.\n", merge)
	}
	if rep != nil {
		fmt.Fprintf(&b, "The report is attached to %s; the item stays %s until you resolve it (board_resolve) or reopen the work.", a.Item, "open")
		if len(a.ClaimIDs) > 0 {
			b.WriteString(" Its claims are " + strings.Join(a.ClaimIDs, ", ") + " in the claim ledger (verify them by id).")
		}
	}
	t.notices = append(t.notices, notice{Assignment: a.ID, Text: strings.TrimSpace(b.String())})
	close(t.changed)
	t.changed = make(chan struct{})
}

// take removes and returns the pending notices of the given assignments (all
// when ids is empty); t.mu is held.
func (t *Team) take(ids []string) []notice {
	var got, kept []notice
	for _, n := range t.notices {
		if len(ids) == 0 || slices.Contains(ids, n.Assignment) {
			got = append(got, n)
		} else {
			kept = append(kept, n)
		}
	}
	t.notices = kept
	return got
}

// live reports whether any of ids (any, when empty) is queued or running;
// t.mu is held.
func (t *Team) live(ids []string) bool {
	for _, id := range t.order {
		a := t.assignments[id]
		if (len(ids) == 0 || slices.Contains(ids, id)) && (a.State == Created || a.State == Queued || a.State == Running) {
			return true
		}
	}
	return false
}

// BeforeCall hands the lead, before its next model call, the notices it did
// not collect with wait: protected runtime observations.
func (t *Team) BeforeCall(context.Context) []llm.Message {
	t.mu.Lock()
	ns := t.take(nil)
	t.mu.Unlock()
	if len(ns) == 0 {
		return nil
	}
	text := renderNotices(ns)
	t.record(record.TypeObservation, "lead", record.Observation{Kind: "assignments", Text: text})
	return []llm.Message{{Role: llm.RoleUser, Content: "[runtime observation] " + text, Protected: true}}
}

func renderNotices(ns []notice) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = n.Text
	}
	return strings.Join(parts, "\n\n")
}

type waitArgs struct {
	Assignments []string `json:"assignments,omitempty" desc:"Assignment ids to wait for (default: any)."`
	TimeoutS    int      `json:"timeout_s,omitempty" desc:"Give up after this many seconds (default 600)."`
}

// waitTool blocks until a report or another runtime observation about the
// given assignments arrives, a user message arrives, or the timeout passes.
func (t *Team) waitTool() tool.Tool {
	return tool.Define("wait", "Block until one of your assignments reports or ends (or a user message arrives), and return what happened. Returns at once if something is already waiting.", 4*tool.DefaultObservationLimit,
		func(ctx context.Context, a waitArgs) tool.Result {
			ids := make([]string, len(a.Assignments))
			for i, id := range a.Assignments {
				ids[i] = strings.ToUpper(strings.TrimSpace(id))
			}
			timeout := 600 * time.Second
			if a.TimeoutS > 0 {
				timeout = time.Duration(a.TimeoutS) * time.Second
			}
			timer := t.cfg.Clock.NewTimer(timeout)
			defer timer.Stop()
			var wake <-chan struct{}
			if t.cfg.Wake != nil {
				wctx, cancel := context.WithCancel(ctx) // ends the watcher with this call
				defer cancel()
				wake = t.cfg.Wake(wctx)
			}
			for {
				t.mu.Lock()
				for _, id := range ids {
					if _, ok := t.assignments[id]; !ok {
						t.mu.Unlock()
						return tool.Errorf("no assignment %q; dispatch returns the ids (A1, A2, …)", id)
					}
				}
				ns := t.take(ids)
				live := t.live(ids)
				changed := t.changed
				t.mu.Unlock()
				if len(ns) > 0 {
					return tool.Result{Output: renderNotices(ns), Protected: true}
				}
				if !live {
					return tool.Result{Output: "nothing to wait for: none of these assignments is queued or running. Look at board_view and decide: resolve, dispatch or finish."}
				}
				select {
				case <-changed:
				case <-wake:
					return tool.Result{Output: "a user message arrived; it is in your next turn. Your assignments keep running."}
				case <-timer.C():
					return tool.Result{Output: fmt.Sprintf("no assignment ended within %s; they are still running (wait again, or cancel_assignment)", timeout)}
				case <-ctx.Done():
					return tool.Errorf("wait interrupted: %v", context.Cause(ctx))
				}
			}
		})
}
