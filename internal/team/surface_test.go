package team_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/team"
	"github.com/apodex/apodex/internal/tool"
)

func specNames(req *llm.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

// listedTools reads the "Your tools: a, b." line of a system prompt.
func listedTools(t *testing.T, system string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(system, "Your tools: ")
	if !ok {
		t.Fatalf("the system prompt lists no tools:\n%s", system)
	}
	line, _, _ := strings.Cut(rest, "\n")
	return strings.Split(strings.TrimSuffix(line, "."), ", ")
}

// The tools offered follow the mode: finish_planning exists only in a run
// started in planning mode and only while planning; writes, shell and
// dispatch are offered once planning is over.
func TestToolsFollowTheMode(t *testing.T) {
	for _, plan := range []bool{false, true} {
		t.Run(map[bool]string{false: "react lead", true: "planning lead"}[plan], func(t *testing.T) {
			h := newHarness(t)
			var mu sync.Mutex
			var offered [][]string
			lead := func(turn int, req *llm.Request) (*llm.Response, error) {
				mu.Lock()
				offered = append(offered, specNames(req))
				mu.Unlock()
				switch turn {
				case 0:
					return calls(add("One", "a thing")), nil
				case 1:
					if plan {
						return calls(call("finish_planning", nil)), nil
					}
					return calls(call("board_cancel", map[string]any{"id": "T1", "reason": "not needed"})), nil
				case 2:
					return calls(call("board_cancel", map[string]any{"id": "T1", "reason": "not needed"})), nil
				}
				return calls(finish("nothing to do")), nil
			}
			model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead}))
			h.run(model, func(c *team.Config) { c.Plan = plan })
			first, last := offered[0], offered[len(offered)-1]
			if slices.Contains(first, "finish_planning") != plan {
				t.Errorf("first request offers %v", first)
			}
			if slices.Contains(last, "finish_planning") {
				t.Errorf("finish_planning still offered after planning: %v", last)
			}
			for _, name := range []string{"dispatch", "write_file", "bash", "finish"} {
				if slices.Contains(first, name) == plan {
					t.Errorf("plan=%v: %s offered=%v in the first request", plan, name, !plan)
				}
				if !slices.Contains(last, name) {
					t.Errorf("%s not offered after planning: %v", name, last)
				}
			}
		})
	}
}

func TestLeadSystemPrompt(t *testing.T) {
	for _, plan := range []bool{false, true} {
		tm := team.New(context.Background(), team.Config{Plan: plan, Log: newHarness(t).log})
		names := []string{"bash", "board_add", "claim_outputs", "recall"}
		var ts []tool.Tool
		for _, n := range names {
			ts = append(ts, tool.Serial(tool.Define(n, "", 0, func(context.Context, struct{}) tool.Result { return tool.Result{} })))
		}
		sys := tm.LeadSystem(tool.NewSet(ts...))
		if strings.Contains(sys, "finish_planning") != plan {
			t.Errorf("plan=%v, prompt:\n%s", plan, sys)
		}
		for _, want := range []string{"run concurrently", "in your next reply", "claim_outputs with their exact paths", "publishing lease"} {
			if !strings.Contains(sys, want) {
				t.Errorf("the lead prompt lacks %q", want)
			}
		}
		if strings.Contains(sys, "read-only for you") {
			t.Errorf("the lead prompt calls /outputs read-only although it has claim_outputs")
		}
		if got := listedTools(t, sys); !slices.Equal(got, names) {
			t.Errorf("listed %v, given %v", got, names)
		}
	}
}

// A subagent's prompt lists exactly the tools its requests offer (recall
// included when compaction is on), and its instructions appear once.
func TestSubagentPromptSurface(t *testing.T) {
	for _, window := range []int{0, 50_000} {
		h := newHarness(t)
		var mu sync.Mutex
		var subReq *llm.Request
		lead := steps(
			calls(add("One", "write it"), dispatch("T1", "writer", "read_file", "write_file")),
			calls(wait("A1")),
			calls(resolve("T1", "report:A1")),
			calls(finish("done")))
		sub := func(turn int, req *llm.Request) (*llm.Response, error) {
			mu.Lock()
			if subReq == nil {
				subReq = &llm.Request{Messages: slices.Clone(req.Messages), Tools: slices.Clone(req.Tools)}
			}
			mu.Unlock()
			return calls(report("did it")), nil
		}
		model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": sub}))
		out := h.run(model, func(c *team.Config) { c.Context = agent.Context{Window: window} })
		if out.Termination != agent.Completed {
			t.Fatalf("window %d: %s (%v)", window, out.Termination, out.Err)
		}
		given := slices.Sorted(slices.Values(specNames(subReq)))
		if got := listedTools(t, subReq.Messages[0].Content); !slices.Equal(got, given) {
			t.Errorf("window %d: prompt lists %v, the request offers %v", window, got, given)
		}
		if slices.Contains(given, "recall") != (window > 0) {
			t.Errorf("window %d: offered %v", window, given)
		}
		all := subReq.Messages[0].Content + subReq.Messages[1].Content
		if n := strings.Count(all, "Do T1 as the objective says"); n != 1 {
			t.Errorf("the instructions appear %d times", n)
		}
	}
}

// board_add calls of one reply get ids in call order and may depend on
// each other, by id or by title.
func TestBoardAddsOfOneReplyDependOnEachOther(t *testing.T) {
	h := newHarness(t)
	lead := steps(
		calls(add("Fetch", "get the data"), add("Sum", "sum it", "T1"), add("Report", "write it up", "Sum", "Fetch")),
		calls(finish("planned")))
	h.leadTurns = 2
	h.run(scripted.New(byAgent(map[string]scripted.Policy{"lead": lead})), nil)
	items := h.team.Board()
	if len(items) != 3 {
		t.Fatalf("board %+v", items)
	}
	want := map[string][]string{"T1": nil, "T2": {"T1"}, "T3": {"T1", "T2"}}
	for _, it := range items {
		if !slices.Equal(it.Deps, want[it.ID]) {
			t.Errorf("%s (%s) deps %v, want %v", it.ID, it.Title, it.Deps, want[it.ID])
		}
		if it.State != board.Open {
			t.Errorf("%s is %s", it.ID, it.State)
		}
	}
}

// A report naming an artifact that does not exist is refused, naming it;
// the subagent goes on and reports again.
func TestReportRefusesMissingArtifacts(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var refusal string
	lead := steps(
		calls(add("One", "write it"), dispatch("T1", "writer", "write_file")),
		calls(wait("A1")),
		calls(resolve("T1", "report:A1")),
		calls(finish("done")))
	sub := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			return calls(writeFile("/workspace/real.txt", "x\n")), nil
		case 1:
			return calls(report("wrote two files", "/workspace/real.txt", "/workspace/ghost.txt", "/etc/passwd")), nil
		}
		mu.Lock()
		refusal = req.Messages[len(req.Messages)-1].Content
		mu.Unlock()
		return calls(report("wrote one file", "/workspace/real.txt")), nil
	}
	out := h.run(scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": sub})), nil)
	if out.Termination != agent.Completed {
		t.Fatalf("%s (%v)", out.Termination, out.Err)
	}
	if !strings.Contains(refusal, "report refused: no such artifact: /workspace/ghost.txt, /etc/passwd") || strings.Contains(refusal, "real.txt") {
		t.Errorf("refusal: %q", refusal)
	}
}

// report runs after the other calls of its reply, so it may name the file a
// write of the same reply creates.
func TestReportAfterWriteInOneReply(t *testing.T) {
	h := newHarness(t)
	lead := steps(
		calls(add("One", "write it"), dispatch("T1", "writer", "write_file")),
		calls(wait("A1")),
		calls(resolve("T1", "report:A1")),
		calls(finish("done")))
	sub := steps(calls(report("wrote it", "/workspace/made.txt"), writeFile("/workspace/made.txt", "x\n")))
	out := h.run(scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": sub})), nil)
	if out.Termination != agent.Completed {
		t.Fatalf("%s (%v)", out.Termination, out.Err)
	}
	if st, _ := h.lastState("A1"); st != team.Reported {
		t.Errorf("A1 ended %s", st)
	}
}
