package team_test

import (
	"os"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/team"
)

// TestPlanningMode: until finish_planning only inspection and board tools
// work; dispatch, writes, shell and finish are refused with the reason;
// finish_planning on an empty board is refused; after planning, the gate
// needs one delegated branch and one verify call and says which is missing.
func TestPlanningMode(t *testing.T) {
	h := newHarness(t)
	h.seed("/inputs/notes.txt", "the answer is 42\n")
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0: // everything that must be refused, and what must work
			return calls(
				call("finish_planning", nil),
				dispatch("T1", "early bird"),
				writeFile("/workspace/plan.txt", "x"),
				bash("echo hi > /workspace/shell.txt"),
				readFile("/inputs/notes.txt"),
				call("board_view", nil),
				finish("no plan at all")), nil
		case 1:
			return calls(add("Answer", "Find the answer in /inputs/notes.txt and write /workspace/answer.txt")), nil
		case 2:
			return calls(call("board_view", nil)), nil
		case 3:
			return calls(call("finish_planning", nil)), nil
		case 4:
			return calls(finish("planned but nothing done")), nil
		case 5:
			return calls(dispatch("T1", "answer finder", "read_file", "write_file")), nil
		}
		switch {
		case !seen(req, "Assignment A1 ("):
			return calls(wait("A1")), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1", "/workspace/answer.txt")), nil
		case called(req, "finish") == 2:
			return calls(finish("delegated, not verified")), nil
		case called(req, "verify") == 0:
			return calls(call("verify", map[string]any{"claim": "The answer is 42", "evidence": []string{"/workspace/answer.txt"}})), nil
		}
		return calls(finish("the answer is 42, delegated and verified")), nil
	}
	sub := steps(
		calls(writeFile("/workspace/answer.txt", "42\n")),
		calls(report("the answer is 42", "/workspace/answer.txt")))
	model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": sub}))
	out := h.run(model, func(c *team.Config) { c.Plan = true })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}

	// Turn 1, in planning mode.
	wantRefused(t, "finish_planning on an empty board", h.nth("lead", "finish_planning", 0), "board is empty", "board_add")
	for _, name := range []string{"dispatch", "write_file", "bash", "finish"} {
		wantRefused(t, name+" in planning mode", h.nth("lead", name, 0), name+" is refused in planning mode", "finish_planning")
	}
	for _, p := range []string{"/workspace/plan.txt", "/workspace/shell.txt"} {
		if _, err := os.Stat(h.host(p)); err == nil {
			t.Errorf("%s was written in planning mode", p)
		}
	}
	if r := h.nth("lead", "read_file", 0); r.IsError || !strings.Contains(r.Output, "the answer is 42") {
		t.Errorf("read_file in planning mode: %q", r.Output)
	}
	wantOK(t, "board_view in planning mode", h.nth("lead", "board_view", 0))
	wantOK(t, "board_add in planning mode", h.nth("lead", "board_add", 0))
	if v := h.nth("lead", "board_view", 1).Output; !strings.Contains(v, "T1") || !strings.Contains(v, "Answer") {
		t.Errorf("board_view after board_add in planning mode:\n%s", v)
	}
	if len(h.assignments("A1")) == 0 || h.assignments("A1")[0].Seq < h.nth("lead", "finish_planning", 1).Seq {
		t.Errorf("A1 was created before planning finished")
	}

	// Leaving planning mode.
	wantOK(t, "finish_planning with a plan", h.nth("lead", "finish_planning", 1))
	plans := decode[struct {
		State string `json:"state"`
	}](t, h.events, record.TypePlanning)
	if len(plans) != 2 || plans[0].State != "started" || plans[1].State != "finished" {
		t.Errorf("planning events = %+v; want started, finished", plans)
	}

	// The gate after planning: it lists everything missing, then only what
	// is still missing.
	wantRefused(t, "finish with nothing dispatched", h.nth("lead", "finish", 1),
		`T1 "Answer" is open`, "no branch was delegated", "no claim was independently verified")
	second := h.nth("lead", "finish", 2)
	wantRefused(t, "finish before verify", second, "no claim was independently verified")
	if strings.Contains(second.Output, "delegated") || strings.Contains(second.Output, "T1") {
		t.Errorf("finish after dispatch and resolve still names what is done: %q", second.Output)
	}
	if r := h.nth("lead", "verify", 0); !strings.Contains(r.Output, "verdict: supported") {
		t.Errorf("verify: %q", r.Output)
	}
	wantOK(t, "the last finish", h.nth("lead", "finish", 3))
	wantLifecycle(t, h, "A1", team.Created, team.Queued, team.Running, team.Reported)
}
