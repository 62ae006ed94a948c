package run_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
)

// kindOf tells a request's conversation by its content alone, so that the
// headers can be checked against it.
func kindOf(req llmtest.Request) string {
	sys := ""
	if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
		sys = req.Messages[0].Content
	}
	last := req.Messages[len(req.Messages)-1].Content
	switch {
	case strings.HasPrefix(sys, "You condense"):
		return "summarizer"
	case strings.HasPrefix(sys, "You are an independent verifier"):
		return "verifier"
	case strings.Contains(last, "soft deadline has passed"):
		return "salvage"
	case strings.HasPrefix(sys, "You are a specialist"):
		return "subagent"
	case strings.HasPrefix(sys, "You are the lead"):
		return "lead"
	}
	return "single"
}

func calls(cs ...llm.ToolCall) llmtest.Turn { return llmtest.Turn{Calls: cs} }

func tc(name, args string) llm.ToolCall { return llm.ToolCall{Name: name, Arguments: args} }

// teamPolicy drives a lead through board_add + dispatch, wait, verify, a
// few board views (its reported prompt size forces compaction summaries),
// then resolve + finish; the subagent reports, the verifier supports.
func teamPolicy() func(n int, req llmtest.Request) llmtest.Turn {
	var mu sync.Mutex
	lead := 0
	big := &llm.Usage{PromptTokens: 1900, CompletionTokens: 10, TotalTokens: 1910, Reported: true}
	return func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch kindOf(req) {
		case "summarizer":
			return llmtest.Turn{Content: "Summary: T1 was added and dispatched to A1, which reported 42."}
		case "verifier":
			return llmtest.Turn{Content: `{"verdict":"supported","reason":"the evidence says 42"}`}
		case "subagent":
			return calls(tc("report", `{"summary":"the sum is 42","claims":[{"text":"the sum is 42","evidence":["/inputs/data.csv"]}]}`))
		}
		lead++
		var t llmtest.Turn
		switch lead {
		case 1:
			t = calls(tc("board_add", `{"title":"sum","objective":"compute the sum"}`),
				tc("dispatch", `{"item":"T1","role":"summer","instructions":"Report the sum, 42.","tools":["read_file"]}`))
		case 2:
			t = calls(tc("wait", `{}`))
		case 3:
			t = calls(tc("verify", `{"claim":"the sum is 42","evidence":["/inputs/data.csv"]}`))
		case 4, 5, 6, 7:
			t = calls(tc("board_view", `{}`))
		default:
			t = calls(tc("board_resolve", `{"id":"T1","note":"verified","refs":["report:A1"]}`), tc("finish", `{"summary":"the sum is 42"}`))
		}
		t.Usage = big
		return t
	}
}

// Every model request carries the run, the agent and its role: a team's
// lead, its subagent, the verifier and the lead's compaction summaries; a
// single agent and its salvage call.
func TestCallerHeadersEndToEnd(t *testing.T) {
	check := func(t *testing.T, srv *llmtest.Server, runID string, agentOf map[string]string) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for i, req := range srv.Requests() {
			kind := kindOf(req)
			seen[kind]++
			h := req.Header
			if got := h.Get(llm.HeaderRun); got != runID {
				t.Errorf("request %d (%s): %s = %q, want %q", i, kind, llm.HeaderRun, got, runID)
			}
			if got := h.Get(llm.HeaderRole); got != kind {
				t.Errorf("request %d (%s): %s = %q", i, kind, llm.HeaderRole, got)
			}
			if got, want := h.Get(llm.HeaderAgent), agentOf[kind]; got != want {
				t.Errorf("request %d (%s): %s = %q, want %q", i, kind, llm.HeaderAgent, got, want)
			}
		}
		t.Logf("requests by kind: %v", seen)
		return seen
	}

	t.Run("team", func(t *testing.T) {
		srv := llmtest.NewOpenAI(t, teamPolicy())
		cfg := config(t, "team-run", nil)
		cfg.InputsDir = t.TempDir()
		put(t, filepath.Join(cfg.InputsDir, "data.csv"), "n\n40\n2\n")
		cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
		cfg.Mode, cfg.Sandbox = run.ModeTeam, "none"
		cfg.Context = record.ContextSettings{Window: 2000}
		s, err := run.Execute(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status != run.StatusCompleted {
			t.Fatalf("ended %s (%s): %s", s.Status, s.Termination, s.Error)
		}
		seen := check(t, srv, "team-run", map[string]string{"lead": "lead", "subagent": "A1", "verifier": "V1", "summarizer": "lead"})
		for _, k := range []string{"lead", "subagent", "verifier", "summarizer"} {
			if seen[k] == 0 {
				t.Errorf("no %s request (saw %v)", k, seen)
			}
		}
		// Accounting: every call is a model_response, the totals are their
		// sum, with the prompt/completion split.
		var want llm.Usage
		responses := 0
		for _, e := range runtest.Events(t, s.RunDir) {
			if e.Type == record.TypeModelResponse {
				responses++
				want = want.Add(decode[record.ModelResponse](t, e).Usage)
			}
		}
		if responses != len(srv.Requests()) {
			t.Errorf("%d model_response events for %d requests", responses, len(srv.Requests()))
		}
		u := s.Usage
		if u.PromptTokens != want.PromptTokens || u.CompletionTokens != want.CompletionTokens || u.TotalTokens != want.TotalTokens ||
			u.PromptTokens+u.CompletionTokens != u.TotalTokens {
			t.Errorf("summary usage %+v, the record's responses sum to %+v", u, want)
		}
	})

	t.Run("single", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
			if kindOf(req) == "salvage" {
				return llmtest.Turn{Content: "partial: nothing done yet"}
			}
			clk.Advance(300 * time.Millisecond) // the soft deadline comes during the steps
			return calls(tc("list_files", `{"path":"/workspace"}`))
		})
		cfg := config(t, "single-run", nil)
		cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
		cfg.Sandbox = "none"
		cfg.SoftDeadline, cfg.Clock = record.Duration(time.Second), clk
		s, err := run.Execute(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Termination != "soft_deadline" {
			t.Fatalf("ended %s: %s", s.Termination, s.Error)
		}
		seen := check(t, srv, "single-run", map[string]string{"single": "main", "salvage": "main"})
		if seen["single"] == 0 || seen["salvage"] != 1 {
			t.Errorf("saw %v, want agent turns and one salvage call", seen)
		}
	})
}

// A model that never calls a tool and answers in text ends the run after
// one nudge, completed, with its answer as the summary.
func TestTextOnlyModelCompletes(t *testing.T) {
	srv := llmtest.NewOpenAI(t, func(n int, _ llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Content: fmt.Sprintf("The answer is 42 (reply %d).", n)}
	})
	cfg := config(t, "text-run", nil)
	cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m", Stream: true})
	cfg.Sandbox = "none"
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); s.Status != run.StatusCompleted || n > 3 {
		t.Fatalf("ended %s (%s) after %d requests: %s", s.Status, s.Termination, n, s.Error)
	}
	if s.Summary != "The answer is 42 (reply 1)." {
		t.Errorf("summary %q", s.Summary)
	}
	finishes := 0
	for _, e := range runtest.Events(t, s.RunDir) {
		if e.Type == record.TypeTextFinish && decode[record.TextFinish](t, e).Accepted {
			finishes++
		}
	}
	if finishes != 1 {
		t.Errorf("%d accepted text_finish events, want 1", finishes)
	}
}
