package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// bigRead returns a distinct body of n bytes per call.
func bigRead(n int) fakeTool {
	var mu sync.Mutex
	calls := 0
	return fakeTool{"read", func(_ context.Context, _ json.RawMessage) tool.Result {
		mu.Lock()
		calls++
		c := calls
		mu.Unlock()
		head := fmt.Sprintf("file %d:", c)
		return tool.Result{Output: head + strings.Repeat("x", n-len(head))}
	}}
}

// reportingModel plays script turns and reports prompt tokens as the
// estimate of what it was sent, like a provider would; it keeps every
// request for inspection.
type reportingModel struct {
	mu    sync.Mutex
	reqs  []*llm.Request
	turns [][]llm.ToolCall
	extra func(req *llm.Request) *llm.Response
}

func (m *reportingModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	cp := *req
	cp.Messages = append([]llm.Message(nil), req.Messages...)
	m.reqs = append(m.reqs, &cp)
	m.mu.Unlock()
	var resp *llm.Response
	switch {
	case req.Purpose == llm.PurposeSummary:
		resp = &llm.Response{Message: llm.Message{Content: "SUMMARY: read files, all x"}}
	case m.extra != nil && m.extra(req) != nil:
		resp = m.extra(req)
	case req.Turn < len(m.turns):
		resp = &llm.Response{Message: llm.Message{ToolCalls: m.turns[req.Turn]}}
	default:
		resp = &llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{finishCall()}}}
	}
	resp.Message.Role = llm.RoleAssistant
	p := estimateTokens(req.Messages)
	resp.Usage = llm.Usage{PromptTokens: p, CompletionTokens: 10, TotalTokens: p + 10, Reported: true}
	return resp, nil
}

func (m *reportingModel) agentRequests() []*llm.Request {
	var out []*llm.Request
	for _, r := range m.reqs {
		if r.Purpose == "" {
			out = append(out, r)
		}
	}
	return out
}

func compactions(t *testing.T, dir string) []record.Compaction {
	t.Helper()
	var out []record.Compaction
	for _, e := range events(t, dir, record.TypeCompaction) {
		var c record.Compaction
		if err := e.Decode(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func readTurns(n int) [][]llm.ToolCall {
	var turns [][]llm.ToolCall
	for i := 0; i < n; i++ {
		turns = append(turns, []llm.ToolCall{call("read", fmt.Sprintf(`{"path":"/inputs/f%d"}`, i))})
	}
	return turns
}

func TestTier1EvictsOldestAndKeepsNewestIntact(t *testing.T) {
	m := &reportingModel{turns: readTurns(12)}
	cfg, dir := newConfig(t, m, bigRead(24<<10))
	cfg.Context = Context{Window: 32000}
	out := Run(context.Background(), cfg, "read twelve files")
	if out.Termination != Completed {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	cs := compactions(t, dir)
	if len(cs) == 0 || cs[0].Tier != 1 || len(cs[0].Evicted) == 0 {
		t.Fatalf("want a tier-1 compaction first, got %+v", cs)
	}
	for _, c := range cs {
		if c.Tier == 2 {
			t.Fatalf("tier 2 ran although tier 1 reached the target: %+v", c)
		}
		if c.TokensAfter >= c.TokensBefore {
			t.Fatalf("compaction bought nothing: %+v", c)
		}
	}
	reqs := m.agentRequests()
	window := 32000
	for i, r := range reqs {
		if got := estimateTokens(r.Messages); got > window {
			t.Fatalf("request %d has %d tokens, over the window %d", i, got, window)
		}
	}
	last := reqs[len(reqs)-1].Messages
	var tools []llm.Message
	for _, msg := range last {
		if msg.Role == llm.RoleTool {
			tools = append(tools, msg)
		}
	}
	newest, oldest := tools[len(tools)-1], tools[0]
	if !strings.HasPrefix(newest.Content, "file 12:") || len(newest.Content) != 24<<10 {
		t.Fatalf("newest result not intact: %.40q (%d bytes)", newest.Content, len(newest.Content))
	}
	if !strings.Contains(oldest.Content, "[evicted to save context: read result") || !strings.Contains(oldest.Content, "recall") {
		t.Fatalf("oldest result not stubbed: %.200q", oldest.Content)
	}
}

func TestRecallReturnsEvictedBody(t *testing.T) {
	m := &reportingModel{turns: readTurns(8)}
	m.extra = func(req *llm.Request) *llm.Response {
		if req.Turn != 8 {
			return nil
		}
		return &llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{call("recall", `{"ref":"call_1_0"}`)}}}
	}
	cfg, _ := newConfig(t, m, bigRead(24<<10))
	cfg.Context = Context{Window: 16000}
	out := Run(context.Background(), cfg, "task")
	tm := toolMessages(out.History)
	got := tm[len(tm)-2] // the recall, before finish's result
	if got.Name != "recall" || got.IsError || !strings.HasPrefix(got.Content, "file 1:") || len(got.Content) != 24<<10 {
		t.Fatalf("recall gave %s error=%v %.60q (%d bytes)", got.Name, got.IsError, got.Content, len(got.Content))
	}
}

func TestTier2WhenTier1IsNotEnough(t *testing.T) {
	// The assistant talks a lot: its messages cannot be evicted, so only a
	// summary brings the context down.
	talk := strings.Repeat("thinking out loud. ", 600)
	m := &reportingModel{}
	m.extra = func(req *llm.Request) *llm.Response {
		if req.Turn >= 10 {
			return nil
		}
		return &llm.Response{Message: llm.Message{Content: talk, ToolCalls: []llm.ToolCall{call("read", `{}`)}}}
	}
	cfg, dir := newConfig(t, m, bigRead(300))
	cfg.Context = Context{Window: 16000}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != Completed {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	var tier2 *record.Compaction
	for _, c := range compactions(t, dir) {
		if c.Tier == 2 && c.Summarized != nil {
			tier2 = &c
			break
		}
	}
	if tier2 == nil {
		t.Fatalf("no tier-2 compaction: %+v", compactions(t, dir))
	}
	reqs := m.agentRequests()
	last := reqs[len(reqs)-1].Messages
	if last[0].Role != llm.RoleSystem || last[1].Content != "task" {
		t.Fatal("head (system prompt, task) not kept verbatim")
	}
	if !strings.Contains(last[2].Content, "SUMMARY: read files") {
		t.Fatalf("summary not after the head: %.100q", last[2].Content)
	}
	for _, r := range m.reqs {
		if r.Purpose == llm.PurposeSummary && estimateTokens(r.Messages) > 16000 {
			t.Fatalf("the summary call overflowed: %d tokens", estimateTokens(r.Messages))
		}
	}
}

func TestNoCompactionLoopWithPathologicalHistory(t *testing.T) {
	// The task alone is over the threshold: nothing can be evicted or
	// summarized, and compaction must stop trying instead of looping.
	m := &reportingModel{turns: readTurns(10)}
	cfg, dir := newConfig(t, m, bigRead(10))
	cfg.Context = Context{Window: 4000}
	out := Run(context.Background(), cfg, strings.Repeat("huge task ", 1800))
	if out.Termination != Completed {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	cs := compactions(t, dir)
	stopped := 0
	for _, c := range cs {
		if c.Tier == 0 && strings.Contains(c.Stopped, "no relief") {
			stopped++
		}
	}
	if stopped == 0 || len(cs) > 9 {
		t.Fatalf("want a recorded stop and few attempts over 11 turns, got %d events: %+v", len(cs), cs)
	}
}

func TestSoftDeadlineWithInjectedClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	m := &reportingModel{turns: readTurns(100)}
	inner := m.Generate
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		clk.Advance(time.Minute) // every call takes a minute
		return inner(ctx, req)
	})
	cfg, dir := newConfig(t, model, bigRead(10))
	cfg.Clock = clk
	// The context deadline is real time: far away, so the injected clock decides.
	cfg.Deadlines = Deadlines{Soft: start.Add(10 * time.Minute), WrapUp: 3 * time.Minute}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != SoftDeadline {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	if out.Turns != 11 { // 10 turns fill the ten minutes, then the finalization call
		t.Fatalf("turns %d, want 10 + finalization", out.Turns)
	}
	var wrap int
	for _, e := range events(t, dir, record.TypeObservation) {
		var o record.Observation
		e.Decode(&o)
		if o.Kind == "wrap_up" {
			wrap++
		}
	}
	if wrap != 1 {
		t.Fatalf("wrap-up notices %d, want exactly 1", wrap)
	}
	final := m.reqs[len(m.reqs)-1]
	// Tool-free: the tools are listed (the history has calls) but none may
	// be called.
	if final.Purpose != llm.PurposeFinalize || final.ToolChoice != llm.ToolChoiceNone || len(final.Tools) == 0 {
		t.Fatalf("last call not tool-free finalization: purpose %q, tool choice %q, %d tools", final.Purpose, final.ToolChoice, len(final.Tools))
	}
	pr := events(t, dir, record.TypePartialResult)
	if len(pr) != 1 || out.Partial == "" {
		t.Fatalf("partial result events %d, partial %q", len(pr), out.Partial)
	}
}

func TestSoftDeadlineRealTimeWithHangingEndpoint(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	hang := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		clk.Advance(150 * time.Millisecond) // the deadline passes while the endpoint hangs
		<-ctx.Done()
		return nil, ctx.Err()
	})
	cfg, dir := newConfig(t, hang)
	cfg.Clock = clk
	cfg.Deadlines = Deadlines{Soft: clk.Now().Add(150 * time.Millisecond), Finalize: 100 * time.Millisecond}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != SoftDeadline {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	var pr record.PartialResult
	evs := events(t, dir, record.TypePartialResult)
	if len(evs) != 1 {
		t.Fatalf("partial_result events: %d", len(evs))
	}
	evs[0].Decode(&pr)
	if pr.Source != "fallback" || !strings.Contains(pr.Text, "soft deadline passed") {
		t.Fatalf("partial result %+v", pr)
	}
}

func TestGateRefusesFinish(t *testing.T) {
	calls := 0
	cfg, _ := newConfig(t, turns([]llm.ToolCall{finishCall()}, []llm.ToolCall{finishCall()}))
	cfg.Gate = func(string) error {
		calls++
		if calls == 1 {
			return fmt.Errorf("item T1 is still open")
		}
		return nil
	}
	out := Run(context.Background(), cfg, "task")
	tm := toolMessages(out.History)
	if out.Termination != Completed || len(tm) != 2 || !strings.Contains(tm[0].Content, "finish refused: item T1 is still open") {
		t.Fatalf("termination %s, results %+v", out.Termination, tm)
	}
}
