package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// report is a wait-like tool whose results are protected fan-in reports.
func report(n int) fakeTool {
	return fakeTool{"wait", func(context.Context, json.RawMessage) tool.Result {
		return tool.Result{Output: "A1 reported: " + strings.Repeat("finding ", n/8), Protected: true}
	}}
}

// validRequests fails the test for any request whose history is not a
// valid conversation (the runtime's own, before any client repair).
func validRequests(t *testing.T, reqs []*llm.Request) {
	t.Helper()
	for i, r := range reqs {
		if p := llm.Problems(r.Messages); p != nil {
			t.Fatalf("request %d (%s) is not a valid conversation: %v", i, r.Purpose, p)
		}
	}
}

func TestTier2KeepsReportsWithoutTheirCalls(t *testing.T) {
	// The lead talks a lot (only a summary helps), waits for reports
	// (protected) and reads in parallel: after tier 2 the reports stay,
	// verbatim, as user messages that say what they are, and every request
	// is a conversation a provider accepts.
	talk := strings.Repeat("thinking out loud. ", 500)
	m := &reportingModel{}
	m.extra = func(req *llm.Request) *llm.Response {
		if req.Turn >= 12 {
			return nil
		}
		calls := []llm.ToolCall{call("wait", `{}`)}
		if req.Turn%2 == 1 {
			calls = append(calls, call("read", `{}`), call("wait", `{}`))
		}
		return &llm.Response{Message: llm.Message{Content: talk, ToolCalls: calls}}
	}
	cfg, dir := newConfig(t, m, bigRead(300), report(400))
	cfg.Context = Context{Window: 20000}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != Completed {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	validRequests(t, m.reqs)
	carried := 0
	for _, c := range compactions(t, dir) {
		if c.Tier == 2 && c.Summarized != nil {
			carried += c.Summarized.Carried
		}
	}
	if carried == 0 {
		t.Fatalf("no tier-2 compaction carried a report: %+v", compactions(t, dir))
	}
	reqs := m.agentRequests()
	last := reqs[len(reqs)-1].Messages
	kept := 0
	for _, msg := range last {
		if msg.Role == llm.RoleUser && strings.Contains(msg.Content, "result of your earlier wait call") && strings.Contains(msg.Content, "A1 reported: finding") {
			kept++
		}
	}
	if kept == 0 {
		t.Fatal("no report kept verbatim as a user message after the summary")
	}
}

// overflowing answers like a provider whose window is limit tokens: a
// longer prompt is refused with a context-length error.
type overflowing struct {
	*reportingModel
	limit  int
	mu     sync.Mutex
	sizes  []int // estimated size of every agent request, refused or not
	refuse int   // refusals so far
}

func (o *overflowing) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	size := estimateTokens(req.Messages)
	if req.Purpose == "" {
		o.mu.Lock()
		o.sizes = append(o.sizes, size)
		o.mu.Unlock()
	}
	if size > o.limit {
		o.mu.Lock()
		o.refuse++
		o.mu.Unlock()
		return nil, (&llm.APIError{StatusCode: 400, URL: "fake", Code: "context_length_exceeded",
			Message: "This model's maximum context length is " + strconv.Itoa(o.limit) + " tokens. However, your messages resulted in " + strconv.Itoa(size) + " tokens."}).Classify("")
	}
	return o.reportingModel.Generate(ctx, req)
}

func TestProviderOverflowCompactsAndRetries(t *testing.T) {
	// The configured window is far too large; the provider's is 12,000
	// tokens. Its refusal is a state: the turn is compacted and retried,
	// the window is learned, and later compactions start on their own.
	m := &overflowing{reportingModel: &reportingModel{turns: readTurns(14)}, limit: 12000}
	cfg, dir := newConfig(t, m, bigRead(8<<10))
	cfg.Context = Context{Window: 1 << 20}
	out := Run(context.Background(), cfg, "read fourteen files")
	if out.Termination != Completed {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	if m.refuse == 0 {
		t.Fatal("the provider never refused: the test proves nothing")
	}
	var forced, later int
	for _, c := range compactions(t, dir) {
		switch {
		case c.Reason == record.ReasonProviderOverflow:
			forced++
			if c.Window != 12000 || !strings.Contains(c.ProviderError, "maximum context length") {
				t.Fatalf("forced compaction did not learn the window from the provider: %+v", c)
			}
		case c.Tier > 0 && forced > 0:
			later++
		}
	}
	if forced == 0 {
		t.Fatal("no compaction recorded with reason provider_overflow")
	}
	if later == 0 {
		t.Fatalf("the learned window never triggered a compaction of its own (%d refusals)", m.refuse)
	}
	if m.refuse > forced {
		t.Fatalf("%d refusals for %d forced compactions: the learned window did not prevent new overflows", m.refuse, forced)
	}
	// Every refused prompt is followed by a shorter one.
	for i := 0; i+1 < len(m.sizes); i++ {
		if m.sizes[i] > m.limit && m.sizes[i+1] >= m.sizes[i] {
			t.Fatalf("request %d (%d tokens) was refused and request %d is not shorter (%d)", i, m.sizes[i], i+1, m.sizes[i+1])
		}
	}
	validRequests(t, m.reqs)
	if out.Turns != 15 {
		t.Fatalf("turns %d, want 15: a refused call is not a turn", out.Turns)
	}
}

func TestProviderOverflowWithNothingToShrink(t *testing.T) {
	// The task alone is over the provider's window: no tier helps, and the
	// run ends as a model error that says so, after trying each tier once.
	m := &overflowing{reportingModel: &reportingModel{turns: readTurns(3)}, limit: 500}
	cfg, dir := newConfig(t, m, bigRead(10))
	cfg.Context = Context{Window: 1 << 20}
	out := Run(context.Background(), cfg, strings.Repeat("huge task ", 600))
	if out.Termination != ModelError {
		t.Fatalf("termination %s, want model_error", out.Termination)
	}
	if !strings.Contains(out.Err.Error(), "cannot shrink") {
		t.Fatalf("error does not say why: %v", out.Err)
	}
	if _, over := llm.IsContextOverflow(out.Err); !over {
		t.Fatalf("the provider's overflow is not kept in the error: %v", out.Err)
	}
	forced := 0
	for _, c := range compactions(t, dir) {
		if c.Reason == record.ReasonProviderOverflow {
			forced++
		}
	}
	if forced != 2 || m.refuse != 1 {
		t.Fatalf("want one refusal and one compaction per tier, got %d refusals and %d compactions", m.refuse, forced)
	}
	var errs int
	for _, e := range events(t, dir, record.TypeModelError) {
		var me record.ModelError
		e.Decode(&me)
		if strings.Contains(me.Error, "maximum context length") {
			errs++
		}
	}
	if errs != 1 {
		t.Fatalf("model_error events naming the provider's message: %d, want 1", errs)
	}
}

func TestFailedSummaryKeepsHistoryAndGoesOn(t *testing.T) {
	// The summary call fails: tier 2 records why, the history stays as it
	// was (and valid), and the run goes on with tier 1 only.
	talk := strings.Repeat("thinking out loud. ", 600)
	m := &reportingModel{}
	m.extra = func(req *llm.Request) *llm.Response {
		if req.Turn >= 8 {
			return nil
		}
		return &llm.Response{Message: llm.Message{Content: talk, ToolCalls: []llm.ToolCall{call("read", `{}`)}}}
	}
	failing := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Purpose == llm.PurposeSummary {
			return nil, errors.New("summarizer down")
		}
		return m.Generate(ctx, req)
	})
	cfg, dir := newConfig(t, failing, bigRead(300))
	cfg.Context = Context{Window: 16000}
	out := Run(context.Background(), cfg, "task")
	if out.Termination != Completed {
		t.Fatalf("termination %s: %v", out.Termination, out.Err)
	}
	failed := false
	for _, c := range compactions(t, dir) {
		if c.Tier == 2 && strings.Contains(c.Stopped, "summary call failed: summarizer down") {
			failed = true
		}
		if c.Summarized != nil {
			t.Fatalf("a summary was recorded although every summary call failed: %+v", c)
		}
	}
	if !failed {
		t.Fatalf("the failed summary is not recorded: %+v", compactions(t, dir))
	}
	validRequests(t, m.reqs)
}
