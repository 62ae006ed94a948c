package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// Budgets end a run with exit 1, the enumerated reason and a closed record.
func TestBudgets(t *testing.T) {
	forever := func(int, llmtest.Request) llmtest.Turn {
		return calls(call("list_files", map[string]any{"path": "/workspace"}), call("list_files", map[string]any{"path": "/inputs"}))
	}
	tests := []struct {
		flag, value, reason string
		turns, toolCalls    int
	}{
		{"--max-turns", "2", "budget_turns", 2, 4},
		{"--max-tool-calls", "3", "budget_tool_calls", 2, 3},
		{"--max-tokens", "200", "budget_tokens", 2, 4}, // 120 tokens a turn
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			srv := llmtest.NewOpenAI(t, forever)
			home := t.TempDir()
			code, out, errOut := cli(t, append(openaiArgs(home, srv), tt.flag, tt.value, "--json", "--quiet", "objective")...)
			if code != 1 {
				t.Errorf("exit %d\n%s", code, errOut)
			}
			s := decodeSummary(t, out)
			if s.Termination != tt.reason || s.Status != "stopped" || s.Turns != tt.turns || s.ToolCalls != tt.toolCalls {
				t.Errorf("summary %+v, want %s after %d turns and %d tool calls", s, tt.reason, tt.turns, tt.toolCalls)
			}
			evs := runtest.Events(t, s.RunDir)
			rf := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
			if len(rf) != 1 || rf[0].Termination != tt.reason {
				t.Errorf("run_finished %+v", rf)
			}
			if len(srv.Requests()) != tt.turns {
				t.Errorf("%d model calls, want %d", len(srv.Requests()), tt.turns)
			}
		})
	}
}

// A reply without tool calls does not end the run: the model is told, as a
// runtime observation, to work through tools.
func TestReplyWithoutToolsIsNudged(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Content: "I would sum the column."}))
	home := t.TempDir()
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--no-stream", "objective")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Stream || reqs[0].IncludeUsage {
		t.Fatalf("%d requests; stream %v with --no-stream", len(reqs), len(reqs) > 0 && reqs[0].Stream)
	}
	msgs := reqs[1].Messages
	last := msgs[len(msgs)-1]
	if msgs[len(msgs)-2].Content != "I would sum the column." || last.Role != "user" || !strings.Contains(last.Content, "finish") {
		t.Errorf("messages after a reply without tools: %+v", msgs[len(msgs)-2:])
	}
	if n := len(decodeAll[record.Observation](t, runtest.Events(t, onlyRun(t, home)), record.TypeObservation)); n != 1 {
		t.Errorf("%d observation events, want 1", n)
	}
}

// Cancelling (Ctrl-C) ends the run as cancelled, exit 1, record closed.
func TestCancelledRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := llmtest.NewOpenAI(t, func(n int, _ llmtest.Request) llmtest.Turn {
		if n == 1 {
			cancel() // the user presses Ctrl-C while the model thinks
			return llmtest.Turn{Hang: true}
		}
		return calls(call("list_files", map[string]any{"path": "/inputs"}))
	})
	home := t.TempDir()
	var out, errOut bytes.Buffer
	code := Run(ctx, append(openaiArgs(home, srv), "--json", "objective"), &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d\n%s", code, errOut.String())
	}
	s := decodeSummary(t, out.String())
	if s.Termination != "cancelled" || s.Turns != 2 || s.ToolCalls != 1 {
		t.Errorf("summary %+v", s)
	}
	evs := runtest.Events(t, s.RunDir)
	if evs[len(evs)-1].Type != record.TypeRunFinished {
		t.Errorf("the record of a cancelled run does not end with run_finished")
	}
}

// A malformed call must not poison the history: later requests carry only
// valid JSON arguments (servers such as vLLM parse them).
func TestMalformedCallInHistoryIsValidJSON(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(llm.ToolCall{Name: "write_file", Arguments: `{"path": `})))
	home := t.TempDir()
	if code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "objective")...); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for i, r := range srv.Requests() {
		for _, m := range r.Messages {
			for _, c := range m.ToolCalls {
				if !jsonValid(c.Arguments) {
					t.Errorf("request %d carries invalid arguments %q", i, c.Arguments)
				}
			}
		}
	}
}
