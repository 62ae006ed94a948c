package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// fakeTool is a hand-written tool whose behaviour is a function.
type fakeTool struct {
	name string
	fn   func(ctx context.Context, args json.RawMessage) tool.Result
}

func (f fakeTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: "fake", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (f fakeTool) Call(ctx context.Context, args json.RawMessage) tool.Result { return f.fn(ctx, args) }

func echo(name string) fakeTool {
	return fakeTool{name, func(_ context.Context, a json.RawMessage) tool.Result {
		return tool.Result{Output: name + ":" + string(a)}
	}}
}

// turns plays one list of calls per turn; past the end it answers with text.
func turns(script ...[]llm.ToolCall) llm.Model {
	return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == llm.RoleAssistant {
				n++
			}
		}
		if n >= len(script) {
			return &llm.Response{Message: llm.Message{Content: "nothing more"}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12, Reported: true}}, nil
		}
		return &llm.Response{Message: llm.Message{ToolCalls: script[n]}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, Reported: true}}, nil
	})
}

func call(name, args string) llm.ToolCall { return llm.ToolCall{Name: name, Arguments: args} }

func finishCall() llm.ToolCall { return call("finish", `{"summary":"done"}`) }

func newConfig(t *testing.T, model llm.Model, tools ...tool.Tool) (Config, string) {
	t.Helper()
	dir := t.TempDir()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return Config{Model: model, Tools: tool.NewSet(append(tools, tool.FinishTool{})...), Log: log, Retry: llm.RetryPolicy{MaxAttempts: 1}}, dir
}

func events(t *testing.T, dir string, typ string) []record.Event {
	t.Helper()
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Event
	for _, e := range c.Events {
		if typ == "" || e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func toolMessages(h []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range h {
		if m.Role == llm.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

func TestParallelCallsRunConcurrentlyAndReturnInOrder(t *testing.T) {
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	waiter := func(name string) fakeTool {
		return fakeTool{name, func(ctx context.Context, _ json.RawMessage) tool.Result {
			started.Done()
			select {
			case <-both:
				return tool.Result{Output: name + " saw its sibling running"}
			case <-time.After(10 * time.Second):
				return tool.Errorf("%s ran alone: calls were not parallel", name)
			}
		}}
	}
	cfg, _ := newConfig(t, turns([]llm.ToolCall{call("slow_b", `{}`), call("slow_a", `{}`)}, []llm.ToolCall{finishCall()}), waiter("slow_a"), waiter("slow_b"))
	out := Run(context.Background(), cfg, "task")
	if out.Termination != Completed {
		t.Fatalf("termination %s (%v)", out.Termination, out.Err)
	}
	tm := toolMessages(out.History)
	if len(tm) != 3 || tm[0].Name != "slow_b" || tm[1].Name != "slow_a" {
		t.Fatalf("results not in call order: %+v", tm)
	}
	for _, m := range tm[:2] {
		if m.IsError {
			t.Fatalf("%s: %s", m.Name, m.Content)
		}
	}
}

func TestMisuseBecomesObservations(t *testing.T) {
	panicky := fakeTool{"panicky", func(context.Context, json.RawMessage) tool.Result { panic("boom") }}
	cfg, dir := newConfig(t, turns(
		[]llm.ToolCall{call("no_such_tool", `{}`), call("echo", `{"path": `), call("panicky", `{}`), call("finish", `{"summary":""}`)},
		[]llm.ToolCall{call("echo", `{"ok":true}`)},
		[]llm.ToolCall{finishCall()},
	), echo("echo"), panicky)
	out := Run(context.Background(), cfg, "task")
	if out.Termination != Completed || out.Summary != "done" {
		t.Fatalf("termination %s summary %q (%v)", out.Termination, out.Summary, out.Err)
	}
	tm := toolMessages(out.History)
	wants := []string{"unknown tool \"no_such_tool\"; the tools you can call are: echo, finish, panicky", "not valid JSON", "failed internally: boom", "summary is empty", `echo:{"ok":true}`}
	for i, w := range wants {
		if !strings.Contains(tm[i].Content, w) {
			t.Errorf("observation %d = %q, want it to contain %q", i, tm[i].Content, w)
		}
		if (i < 4) != tm[i].IsError {
			t.Errorf("observation %d IsError=%v", i, tm[i].IsError)
		}
	}
	if got := len(events(t, dir, record.TypeToolResult)); got != 6 {
		t.Fatalf("tool_result events %d, want 6", got)
	}
}

func TestBudgets(t *testing.T) {
	loopForever := turns(
		[]llm.ToolCall{call("echo", `{}`), call("echo", `{}`)},
		[]llm.ToolCall{call("echo", `{}`), call("echo", `{}`)},
		[]llm.ToolCall{call("echo", `{}`), call("echo", `{}`)},
		[]llm.ToolCall{call("echo", `{}`), call("echo", `{}`)},
	)
	cases := []struct {
		name      string
		budget    Budget
		want      Termination
		turns     int
		toolCalls int
	}{
		{"turns", Budget{MaxTurns: 2}, BudgetTurns, 2, 4},
		{"tool calls mid-turn", Budget{MaxToolCalls: 3}, BudgetToolCalls, 2, 3},
		{"tokens", Budget{MaxTokens: 30}, BudgetTokens, 2, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := newConfig(t, loopForever, echo("echo"))
			cfg.Budget = tc.budget
			out := Run(context.Background(), cfg, "task")
			if out.Termination != tc.want || out.Turns != tc.turns || out.ToolCalls != tc.toolCalls {
				t.Fatalf("got %s turns %d calls %d, want %s %d %d", out.Termination, out.Turns, out.ToolCalls, tc.want, tc.turns, tc.toolCalls)
			}
		})
	}
}

func TestToolCallBudgetRefusesExtraCallsInTurn(t *testing.T) {
	cfg, _ := newConfig(t, turns([]llm.ToolCall{call("echo", `{}`), call("echo", `{}`), call("echo", `{}`)}), echo("echo"))
	cfg.Budget = Budget{MaxToolCalls: 2}
	out := Run(context.Background(), cfg, "task")
	tm := toolMessages(out.History)
	if len(tm) != 3 || tm[1].IsError || !tm[2].IsError || !strings.Contains(tm[2].Content, "budget") {
		t.Fatalf("third call should be refused by the budget: %+v", tm)
	}
}

func TestModelErrorEndsRunAndIsRecorded(t *testing.T) {
	failing := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return nil, &llm.APIError{StatusCode: 401, URL: "http://x/v1/chat/completions", Message: "bad key"}
	})
	cfg, dir := newConfig(t, failing)
	out := Run(context.Background(), cfg, "task")
	if out.Termination != ModelError || out.Err == nil || !strings.Contains(out.Err.Error(), "401") {
		t.Fatalf("got %s %v", out.Termination, out.Err)
	}
	if len(events(t, dir, record.TypeModelError)) != 1 {
		t.Fatal("model_error not recorded")
	}
}

func TestRetriesAreRecorded(t *testing.T) {
	n := 0
	flaky := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		n++
		if n == 1 {
			return nil, &llm.APIError{StatusCode: 429, Message: "slow down"}
		}
		return turns([]llm.ToolCall{finishCall()}).Generate(ctx, req)
	})
	cfg, dir := newConfig(t, flaky)
	cfg.Retry = llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != Completed {
		t.Fatalf("got %s %v", out.Termination, out.Err)
	}
	if got := len(events(t, dir, record.TypeModelRetry)); got != 1 {
		t.Fatalf("model_retry events %d, want 1", got)
	}
}

func TestCancellationAndHardTimeout(t *testing.T) {
	blocking := fakeTool{"block", func(ctx context.Context, _ json.RawMessage) tool.Result {
		<-ctx.Done()
		return tool.Errorf("cancelled")
	}}
	for _, tc := range []struct {
		cause error
		want  Termination
	}{{errors.New("user pressed ^C"), Cancelled}, {ErrHardTimeout, HardTimeout}} {
		t.Run(string(tc.want), func(t *testing.T) {
			cfg, _ := newConfig(t, turns([]llm.ToolCall{call("block", `{}`)}, []llm.ToolCall{finishCall()}), blocking)
			ctx, cancel := context.WithCancelCause(context.Background())
			cfg.OnStep = nil
			go func() { time.Sleep(20 * time.Millisecond); cancel(tc.cause) }()
			out := Run(ctx, cfg, "task")
			if out.Termination != tc.want {
				t.Fatalf("got %s, want %s", out.Termination, tc.want)
			}
		})
	}
}

func TestTextReplyGetsRuntimeObservationNotUserMessage(t *testing.T) {
	cfg, dir := newConfig(t, turns())
	cfg.Budget = Budget{MaxTurns: 2}
	cfg.RequireFinish = true
	out := Run(context.Background(), cfg, "task")
	if out.Termination != BudgetTurns {
		t.Fatalf("got %s", out.Termination)
	}
	obs := events(t, dir, record.TypeObservation)
	if len(obs) != 2 {
		t.Fatalf("observation events %d, want 2", len(obs))
	}
	last := out.History[len(out.History)-1]
	if !strings.HasPrefix(last.Content, "[runtime observation]") {
		t.Fatalf("nudge not marked as runtime observation: %q", last.Content)
	}
}

func TestRecordReconstructsRequests(t *testing.T) {
	var seen [][]llm.Message
	inner := turns([]llm.ToolCall{call("echo", `{"a":1}`)}, []llm.ToolCall{finishCall()})
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		seen = append(seen, append([]llm.Message(nil), req.Messages...))
		return inner.Generate(ctx, req)
	})
	cfg, dir := newConfig(t, model, echo("echo"))
	Run(context.Background(), cfg, strings.Repeat("long task ", 1000))
	var rebuilt []json.RawMessage
	reqs := events(t, dir, record.TypeModelRequest)
	for i, e := range reqs {
		var mr record.ModelRequest
		if err := e.Decode(&mr); err != nil {
			t.Fatal(err)
		}
		if mr.From != len(rebuilt) {
			// the assistant reply is recorded in model_response, not repeated
			rebuilt = append(rebuilt, nil)
		}
		if mr.From != len(rebuilt) || mr.Turn != i+1 {
			t.Fatalf("request %d starts at %d, have %d messages", i, mr.From, len(rebuilt))
		}
		rebuilt = append(rebuilt, mr.Messages...)
	}
	if len(rebuilt) != len(seen[len(seen)-1]) {
		t.Fatalf("rebuilt %d messages, model saw %d", len(rebuilt), len(seen[len(seen)-1]))
	}
	if !strings.Contains(string(rebuilt[1]), `"content_ref":"sha256:`) {
		t.Fatalf("large task not moved to a blob: %.200s", rebuilt[1])
	}
	all := events(t, dir, "")
	for i, e := range all {
		if e.Seq != int64(i+1) || e.Agent != "main" {
			t.Fatalf("event %d: seq %d agent %q", i, e.Seq, e.Agent)
		}
	}
}
