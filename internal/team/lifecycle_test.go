package team_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/team"
)

// procsWith lists the pids whose command line contains s.
func procsWith(s string) []string {
	var pids []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leadNotices is everything the runtime told the lead about its
// assignments: wait results and observations before its model calls.
func (h *harness) leadNotices() string {
	var b strings.Builder
	for _, r := range h.results("lead", "wait") {
		b.WriteString(r.Output + "\n")
	}
	for _, e := range h.events {
		if e.Type == "observation" && e.Agent == "lead" {
			var o struct {
				Text string `json:"text"`
			}
			e.Decode(&o)
			b.WriteString(o.Text + "\n")
		}
	}
	return b.String()
}

// TestCancelAssignment: cancel_assignment stops a running subagent whose
// bash is in a long sleep: the state is cancelled with the reason, the
// sleep process is gone, and the lead is told.
func TestCancelAssignment(t *testing.T) {
	h := newHarness(t)
	h.needSandbox()
	mark := fmt.Sprintf("30.%d%06d", os.Getpid(), time.Now().UnixNano()%1000000)
	var saw flags
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			return calls(add("Sleep", "Sleep for a long time"), dispatch("T1", "sleeper", "bash")), nil
		case 1:
			// Cancel only once the sleep is really running in the sandbox.
			if !eventually(10*time.Second, func() bool { return len(procsWith("sleep "+mark)) > 0 }) {
				saw.set("no sleep", "the subagent's sleep never appeared in /proc")
			}
			return calls(call("cancel_assignment", map[string]any{"assignment": "a1"})), nil
		case 2:
			return calls(wait("A1")), nil
		case 3:
			if pids := procsWith(mark); len(pids) > 0 {
				saw.set("sleep alive", fmt.Sprintf("after wait returned, processes %v still run the sleep", pids))
			}
			return calls(call("cancel_assignment", map[string]any{"assignment": "A1"}),
				call("cancel_assignment", map[string]any{"assignment": "A9"}),
				call("board_cancel", map[string]any{"id": "T1", "reason": "no longer needed"})), nil
		}
		return calls(finish("cancelled the sleeper")), nil
	}
	sub := steps(calls(call("bash", map[string]any{"command": "sleep " + mark, "timeout_s": 120})),
		calls(report("slept")))
	out := h.run(scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": sub})), nil)
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	for _, k := range []string{"no sleep", "sleep alive"} {
		if v := saw.get(k); v != "" {
			t.Error(v)
		}
	}
	if pids := procsWith(mark); len(pids) > 0 {
		t.Errorf("the subagent's sleep survives the run: pids %v", pids)
	}
	wantLifecycle(t, h, "A1", team.Created, team.Queued, team.Running, team.Cancelled)
	if _, reason := h.lastState("A1"); !strings.Contains(reason, "cancelled by the lead") {
		t.Errorf("cancel reason = %q", reason)
	}
	if r := h.nth("lead", "cancel_assignment", 0); r.IsError || !strings.Contains(r.Output, "A1") {
		t.Errorf("cancel_assignment a1: %q", r.Output)
	}
	// The notice comes as wait's result, or before the lead's next call
	// when the assignment ended first (then wait has nothing to wait for).
	if w := h.leadNotices(); !strings.Contains(w, "A1 (sleeper) on T1 ended: cancelled") {
		t.Errorf("the lead was not told of the cancellation: %q", w)
	}
	wantRefused(t, "cancelling an ended assignment", h.nth("lead", "cancel_assignment", 1), "A1 already ended (cancelled)")
	wantRefused(t, "cancelling an unknown assignment", h.nth("lead", "cancel_assignment", 2), `"A9"`)
	if r := h.nth("A1", "bash", 0); !r.IsError || !strings.Contains(r.Output, "stopped") {
		t.Errorf("A1's bash after the cancel: %q; want it stopped", r.Output)
	}
	if got := h.results("A1", "report"); len(got) != 0 {
		t.Errorf("the cancelled subagent went on to report: %v", got)
	}
}

// TestReopenCancelsDescendantsOnly: reopening T2 reopens its dependent T3
// (in progress) and cancels T3's running assignment; the independent T1
// stays resolved and its assignment untouched.
func TestReopenCancelsDescendantsOnly(t *testing.T) {
	h := newHarness(t)
	a3Running := make(chan struct{})
	var saw flags
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch {
		case turn == 0:
			return calls(add("Independent", "Stand alone"), add("Premise", "Establish the premise"),
				add("Built on premise", "Use the premise", "T2"),
				dispatch("T1", "independent worker"), dispatch("T2", "premise worker")), nil
		case !seen(req, "Assignment A1 (") || !seen(req, "Assignment A2 ("):
			return calls(wait("A1", "A2")), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1"), resolve("T2", "report:A2"), dispatch("T3", "builder")), nil
		case called(req, "board_reopen") == 0:
			select {
			case <-a3Running:
			case <-time.After(10 * time.Second):
				saw.set("A3", "A3 never called its model")
			}
			return calls(call("board_reopen", map[string]any{"id": "T2", "reason": "the premise was wrong"})), nil
		case !seen(req, "Assignment A3 ("):
			return calls(wait("A3")), nil
		case called(req, "board_resolve") == 2:
			return calls(resolve("T2", "report:A2"), call("board_cancel", map[string]any{"id": "T3", "reason": "dropped"})), nil
		}
		return calls(finish("reopened and settled")), nil
	}
	sm := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "*": steps(calls(report("done")))}))
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Agent == "A3" { // works until it is stopped
			close(a3Running)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		return sm.Generate(ctx, req)
	})
	out := h.run(model, nil)
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	if v := saw.get("A3"); v != "" {
		t.Fatal(v)
	}
	if r := h.nth("lead", "board_reopen", 0); r.IsError || !strings.Contains(r.Output, "reopened T2 and its dependents T3") {
		t.Errorf("board_reopen: %q", r.Output)
	}
	evs, seqs := h.boardEvents()
	var reopenSeq int64
	for i, e := range evs {
		if e.Op == board.OpReopen {
			if e.ID != "T2" || !slices.Equal(e.Reopened, []string{"T3"}) {
				t.Errorf("reopen event %+v; want T2 with T3", e)
			}
			reopenSeq = seqs[i]
		}
	}
	after := h.boardAt(reopenSeq + 1)
	for id, want := range map[string]board.State{"T1": board.Resolved, "T2": board.Open, "T3": board.Open} {
		if got := h.item(after, id).State; got != want {
			t.Errorf("after the reopen %s is %s; want %s", id, got, want)
		}
	}
	wantLifecycle(t, h, "A3", team.Created, team.Queued, team.Running, team.Cancelled)
	if _, reason := h.lastState("A3"); !strings.Contains(reason, "T3 was reopened") {
		t.Errorf("A3's cancel reason = %q; want it to name the reopen", reason)
	}
	if h.stateSeq("A3", team.Cancelled) < reopenSeq {
		t.Errorf("A3 was cancelled before the reopen")
	}
	for _, id := range []string{"A1", "A2"} {
		wantLifecycle(t, h, id, team.Created, team.Queued, team.Running, team.Reported)
	}
	if !strings.Contains(h.leadNotices(), "A3 (builder) on T3 ended: cancelled") {
		t.Errorf("the lead was not told A3 was cancelled:\n%s", h.leadNotices())
	}
}

// TestAssignmentFailures: a subagent past its time budget ends timeout, one
// whose model fails ends failed with the reason, and the lead hears of
// both; dispatch refuses a tool a subagent may not have (naming the allowed
// ones), an unknown item and a closed one.
func TestAssignmentFailures(t *testing.T) {
	h := newHarness(t)
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch {
		case turn == 0:
			return calls(add("Slow", "Takes forever"), add("Broken", "Meets a broken model"), add("Dropped", "Not needed"),
				call("board_cancel", map[string]any{"id": "T3", "reason": "not needed"})), nil
		case turn == 1:
			return calls(dispatch("T1", "overreacher", "read_file", "dispatch"),
				dispatch("T9", "ghost"),
				dispatch("T3", "late"),
				call("dispatch", map[string]any{"item": "T1", "role": " ", "instructions": "x"}),
				dispatch("T1", "slowpoke"), dispatch("T2", "unlucky")), nil
		case !seen(req, "Assignment A1 (") || !seen(req, "Assignment A2 ("):
			return calls(wait()), nil
		case called(req, "board_view") == 0:
			return calls(call("board_view", nil)), nil
		case called(req, "board_cancel") == 1:
			return calls(call("board_cancel", map[string]any{"id": "T1", "reason": "too slow"}),
				call("board_cancel", map[string]any{"id": "T2", "reason": "broken"})), nil
		}
		return calls(finish("gave up on both")), nil
	}
	sm := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead}))
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		switch req.Agent {
		case "A1":
			<-ctx.Done()
			return nil, context.Cause(ctx)
		case "A2":
			return nil, errors.New("upstream exploded")
		}
		return sm.Generate(ctx, req)
	})
	out := h.run(model, func(c *team.Config) { c.SubTimeout = 300 * time.Millisecond })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}

	wantRefused(t, "a subagent given dispatch", h.nth("lead", "dispatch", 0),
		`"dispatch"`, "read_file, write_file, edit_file, list_files, grep, bash, claim_outputs")
	wantRefused(t, "dispatch on an unknown item", h.nth("lead", "dispatch", 1), "T9", "T1–T3")
	wantRefused(t, "dispatch on a cancelled item", h.nth("lead", "dispatch", 2), "T3 is cancelled")
	wantRefused(t, "dispatch without a role", h.nth("lead", "dispatch", 3), "role")
	wantOK(t, "dispatch T1", h.nth("lead", "dispatch", 4))
	if r := h.nth("lead", "dispatch", 4); !strings.Contains(r.Output, "dispatched A1") {
		t.Errorf("the first accepted dispatch is not A1: %q", r.Output)
	}

	wantLifecycle(t, h, "A1", team.Created, team.Queued, team.Running, team.Timeout)
	if _, reason := h.lastState("A1"); !strings.Contains(reason, "time budget of 300ms") {
		t.Errorf("A1's timeout reason = %q", reason)
	}
	wantLifecycle(t, h, "A2", team.Created, team.Queued, team.Running, team.Failed)
	if _, reason := h.lastState("A2"); !strings.Contains(reason, "model_error") || !strings.Contains(reason, "upstream exploded") {
		t.Errorf("A2's failure reason = %q", reason)
	}
	notices := h.leadNotices()
	for _, want := range []string{"A1 (slowpoke) on T1 ended: timeout", "A2 (unlucky) on T2 ended: failed (model_error", "upstream exploded"} {
		if !strings.Contains(notices, want) {
			t.Errorf("the lead was not told %q:\n%s", want, notices)
		}
	}
	// A failed or timed-out assignment leaves its item open, unowned.
	if v := h.nth("lead", "board_view", 0).Output; !strings.Contains(v, "2 open") {
		t.Errorf("board after the failures:\n%s", v)
	}
}

// TestQueuedStartInDispatchOrder: with one slot, assignments dispatched in
// one turn start running in dispatch order (the package's guarantee:
// "queued ones start, in dispatch order, as slots free"). The scheduler's
// choice among waiting goroutines varies, so the run is repeated.
func TestQueuedStartInDispatchOrder(t *testing.T) {
	const n, runs = 12, 5
	for r := range runs {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			h := newHarness(t)
			lead := func(turn int, req *llm.Request) (*llm.Response, error) {
				if turn == 0 {
					var cs []llm.ToolCall
					for i := 1; i <= n; i++ {
						cs = append(cs, add(fmt.Sprintf("Part %d", i), "Report"))
					}
					for i := 1; i <= n; i++ {
						cs = append(cs, dispatch(fmt.Sprintf("T%d", i), "worker", "read_file"))
					}
					return calls(cs...), nil
				}
				for i := 1; i <= n; i++ {
					if !seen(req, fmt.Sprintf("Assignment A%d (", i)) {
						return calls(wait()), nil
					}
				}
				if called(req, "board_resolve") == 0 {
					var cs []llm.ToolCall
					for i := 1; i <= n; i++ {
						cs = append(cs, resolve(fmt.Sprintf("T%d", i)))
					}
					return calls(cs...), nil
				}
				return calls(finish("all parts")), nil
			}
			model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "*": steps(calls(report("done")))}))
			out := h.run(model, func(c *team.Config) { c.Concurrency = 1 })
			if out.Termination != agent.Completed {
				t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
			}
			var order []string
			for _, a := range decode[assignmentEvent](t, h.events, record.TypeAssignment) {
				if a.State == team.Running {
					order = append(order, a.Assignment)
				}
			}
			var want []string
			for i := 1; i <= n; i++ {
				want = append(want, fmt.Sprintf("A%d", i))
			}
			if !slices.Equal(order, want) {
				t.Errorf("assignments started running in the order %v; want dispatch order %v", order, want)
			}
		})
	}
}

// TestDispatchThenWaitInOneTurn: a lead that dispatches and waits in the
// same turn (a common way for a model to batch its calls) waits for the
// assignment it just dispatched, and a board_view after a board_add in one
// turn shows the new item: observations follow the call order, as the
// board mutations do, not the scheduling of the turn's calls.
func TestDispatchThenWaitInOneTurn(t *testing.T) {
	// The wrong order shows only on some schedules, so the run is repeated.
	for r := range 20 {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			h := newHarness(t)
			lead := func(turn int, req *llm.Request) (*llm.Response, error) {
				switch {
				case turn == 0:
					return calls(add("Only", "Report"), call("board_view", nil), dispatch("T1", "worker", "read_file"), wait("A1")), nil
				case !seen(req, "Assignment A1 ("):
					return calls(wait("A1")), nil
				case called(req, "board_resolve") == 0:
					return calls(resolve("T1", "report:A1")), nil
				}
				return calls(finish("done")), nil
			}
			model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "*": steps(calls(report("done")))}))
			if out := h.run(model, nil); out.Termination != agent.Completed {
				t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
			}
			if v := h.nth("lead", "board_view", 0).Output; !strings.Contains(v, "T1") {
				t.Errorf("board_view called after board_add in the same turn does not show T1:\n%s", v)
			}
			if w := h.nth("lead", "wait", 0); w.IsError || !strings.Contains(w.Output, "Assignment A1 (") {
				t.Errorf("wait called after dispatch in the same turn: %q; want A1's report", w.Output)
			}
		})
	}
}
