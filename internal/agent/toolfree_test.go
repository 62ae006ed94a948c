package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// replies answers the i-th call with the i-th entry: text when it has no
// calls; past the end, with text.
func replies(script ...llm.Message) (llm.Model, *int) {
	n := 0
	return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		m := llm.Message{Content: "more text"}
		if n < len(script) {
			m = script[n]
		}
		n++
		return &llm.Response{Message: m, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12, Reported: true}}, nil
	}), &n
}

func text(s string) llm.Message { return llm.Message{Content: s} }

func TestToolFreeAnswers(t *testing.T) {
	echoCall := llm.Message{ToolCalls: []llm.ToolCall{call("echo", `{}`)}}
	tests := []struct {
		name     string
		script   []llm.Message
		require  bool
		gate     func(calls *int) func(string) error
		want     Termination
		calls    int
		summary  string
		finishes []bool // accepted of each text_finish event
	}{
		{name: "second text reply finishes", script: []llm.Message{text("thinking"), text("The answer is 42.")},
			want: Completed, calls: 2, summary: "The answer is 42.", finishes: []bool{true}},
		{name: "a tool call resets the nudge", script: []llm.Message{text("a"), echoCall, text("b"), text("final")},
			want: Completed, calls: 4, summary: "final", finishes: []bool{true}},
		{name: "an empty reply is not a summary", script: []llm.Message{text("a"), text("  "), text("final")},
			want: Completed, calls: 3, summary: "final", finishes: []bool{true}},
		{name: "the gate still decides", script: []llm.Message{text("a"), text("early"), text("late")},
			gate: func(calls *int) func(string) error {
				return func(string) error {
					if *calls++; *calls == 1 {
						return errors.New("T1 is open")
					}
					return nil
				}
			},
			want: Completed, calls: 3, summary: "late", finishes: []bool{false, true}},
		{name: "require finish keeps nudging", script: []llm.Message{text("a"), text("b"), text("c")}, require: true,
			want: BudgetTurns, calls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model, n := replies(tt.script...)
			cfg, dir := newConfig(t, model, echo("echo"))
			cfg.Budget = Budget{MaxTurns: 3}
			if len(tt.script) > 3 {
				cfg.Budget.MaxTurns = len(tt.script)
			}
			cfg.RequireFinish = tt.require
			var gateCalls int
			if tt.gate != nil {
				cfg.Gate = tt.gate(&gateCalls)
			}
			out := Run(context.Background(), cfg, "task")
			if out.Termination != tt.want || *n != tt.calls || out.Summary != tt.summary {
				t.Fatalf("got %s after %d calls, summary %q; want %s after %d, %q", out.Termination, *n, out.Summary, tt.want, tt.calls, tt.summary)
			}
			var got []bool
			for _, e := range events(t, dir, record.TypeTextFinish) {
				var tf record.TextFinish
				if err := e.Decode(&tf); err != nil {
					t.Fatal(err)
				}
				got = append(got, tf.Accepted)
				if !tf.Accepted && tf.Refused == "" {
					t.Error("a refused text finish does not say why")
				}
			}
			if len(got) != len(tt.finishes) {
				t.Fatalf("text_finish accepted = %v, want %v", got, tt.finishes)
			}
			for i := range got {
				if got[i] != tt.finishes[i] {
					t.Fatalf("text_finish accepted = %v, want %v", got, tt.finishes)
				}
			}
			nudge := events(t, dir, record.TypeObservation)[0]
			var o record.Observation
			nudge.Decode(&o)
			saysEnds := strings.Contains(o.Text, "taken as your final summary")
			if saysEnds == tt.require {
				t.Errorf("require=%v, nudge: %q", tt.require, o.Text)
			}
		})
	}
}

func TestNudgeNamesTheFinishTool(t *testing.T) {
	model, _ := replies(text("a"), text("b"))
	cfg, dir := newConfig(t, model)
	cfg.FinishTool = "report"
	Run(context.Background(), cfg, "task")
	var o record.Observation
	events(t, dir, record.TypeObservation)[0].Decode(&o)
	if !strings.Contains(o.Text, "call report with a summary") {
		t.Errorf("nudge: %q", o.Text)
	}
}

// With steps longer than the last tenth of the soft deadline, the wrap-up
// notice still reaches a model call before the salvage call.
func TestWrapUpSeenWithLongSteps(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var reqs []*llm.Request
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		mu.Lock()
		reqs = append(reqs, &llm.Request{Purpose: req.Purpose, Messages: append([]llm.Message(nil), req.Messages...)})
		mu.Unlock()
		clk.Advance(2500 * time.Millisecond) // every step takes 2.5 s
		if req.Purpose == llm.PurposeFinalize {
			return &llm.Response{Message: text("partial: step 3 of 5")}, nil
		}
		return &llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{call("echo", `{}`)}}}, nil
	})
	cfg, _ := newConfig(t, model, echo("echo"))
	cfg.Clock = clk
	soft := 10 * time.Second
	cfg.Deadlines = Deadlines{Soft: clk.Now().Add(soft), WrapUp: soft / 10, Finalize: 5 * time.Second}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != SoftDeadline || out.Partial == "" {
		t.Fatalf("got %s, partial %q", out.Termination, out.Partial)
	}
	last := len(reqs) - 1
	if last < 1 || reqs[last].Purpose != llm.PurposeFinalize {
		t.Fatalf("the last call is not the salvage call: %d calls", len(reqs))
	}
	carries := func(r *llm.Request) bool {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "Wrap up now") {
				return true
			}
		}
		return false
	}
	if !carries(reqs[last-1]) {
		t.Fatalf("the request before the salvage call does not carry the wrap-up notice")
	}
	if carries(reqs[0]) || carries(reqs[1]) {
		t.Errorf("the wrap-up notice came before two steps were measured")
	}
}
