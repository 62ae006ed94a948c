package main

// Long horizons, checked from outside as issue 4 says: a scripted endpoint
// that reads twelve 24 KB files against a small --context-window, a slow
// endpoint that never stops against --soft-deadline, and an endpoint that
// answers 429, then 500, then succeeds.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// lrFiles writes n text files of size bytes each into a new directory:
// f01.txt, f02.txt, ….
func lrFiles(t *testing.T, n, size int) string {
	t.Helper()
	dir := t.TempDir()
	for i := 1; i <= n; i++ {
		var b strings.Builder
		for line := 1; b.Len() < size; line++ {
			fmt.Fprintf(&b, "file %02d line %04d: the quick brown fox jumps over the lazy dog, measurement %d\n", i, line, i*line)
		}
		if err := os.WriteFile(filepath.Join(dir, lrName(i)), []byte(b.String()[:size]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func lrName(i int) string { return fmt.Sprintf("f%02d.txt", i) }

// lrTokens is what a provider would report as the prompt of req: about a
// token per four characters of the body.
func lrTokens(req llmtest.Request) int { return len(req.Raw) / 4 }

// lrUsage reports req's prompt as lrTokens and a short completion.
func lrUsage(req llmtest.Request) *llm.Usage {
	p := lrTokens(req)
	return &llm.Usage{PromptTokens: p, CompletionTokens: 20, TotalTokens: p + 20, Reported: true}
}

// lrReader is an endpoint that reads files f01…fNN one per turn, then
// recalls the first result, then finishes, reporting usage as a provider
// would. A summary request (no tools) is answered with summary.
type lrReader struct {
	files   int
	summary string

	mu     sync.Mutex
	agent  []llmtest.Request // the agent's requests (with tools), in order
	recall string            // the ref the agent recalls
}

func (r *lrReader) policy(_ int, req llmtest.Request) llmtest.Turn {
	if len(req.Tools) == 0 {
		return llmtest.Turn{Content: r.summary, Usage: lrUsage(req)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := len(r.agent)
	r.agent = append(r.agent, req)
	var c llm.ToolCall
	switch {
	case k < r.files:
		c = call("read_file", map[string]any{"path": "/inputs/" + lrName(k+1)})
	case k == r.files && r.recall != "":
		c = call("recall", map[string]any{"ref": r.recall})
	default:
		c = finish("read every file")
	}
	return llmtest.Turn{Calls: []llm.ToolCall{c}, Usage: lrUsage(req)}
}

func (r *lrReader) agentRequests() []llmtest.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]llmtest.Request(nil), r.agent...)
}

// lrCompaction is a compaction event and the turn of the agent request
// that followed it (1-based, as model_request counts).
type lrCompaction struct {
	record.Compaction
	next int
}

func lrCompactions(t *testing.T, evs []record.Event) []lrCompaction {
	t.Helper()
	var out []lrCompaction
	pending := 0
	for _, e := range evs {
		switch e.Type {
		case record.TypeCompaction:
			var c record.Compaction
			if err := e.Decode(&c); err != nil {
				t.Fatal(err)
			}
			out = append(out, lrCompaction{Compaction: c})
			pending++
		case record.TypeModelRequest:
			var mr record.ModelRequest
			if err := e.Decode(&mr); err != nil {
				t.Fatal(err)
			}
			for i := len(out) - pending; i < len(out); i++ {
				out[i].next = mr.Turn
			}
			pending = 0
		}
	}
	return out
}

// lrResult is the recorded observation of the call whose arguments
// mention arg.
func lrResult(t *testing.T, evs []record.Event, name, arg string) record.ToolResult {
	t.Helper()
	id := ""
	for _, c := range decodeAll[record.ToolCall](t, evs, record.TypeToolCall) {
		if c.Name == name && strings.Contains(c.Arguments, arg) {
			id = c.CallID
		}
	}
	for _, r := range decodeAll[record.ToolResult](t, evs, record.TypeToolResult) {
		if r.CallID == id {
			return r
		}
	}
	t.Fatalf("no %s result for %q", name, arg)
	return record.ToolResult{}
}

const lrWindow = 16000

// Twelve 24 KB files read one per turn against a 16k window, usage
// reported as a provider would: compaction starts with tier 1, every
// request stays under the window, the request after a compaction is back
// under the threshold, the newest result is intact, the oldest is a stub
// that recall brings back.
func TestLongRunCompaction(t *testing.T) {
	home, inputs := t.TempDir(), lrFiles(t, 12, 24<<10)
	ep := &lrReader{files: 12, summary: "Summary: the agent read the input files one by one with read_file; each holds numbered lines about a fox.", recall: "call_0_0"}
	srv := llmtest.NewOpenAI(t, ep.policy)
	s := peRun(t, 0, append(openaiArgs(home, srv), "--inputs", inputs, "--context-window", fmt.Sprint(lrWindow), "read every file")...)
	if s.Status != "completed" {
		t.Fatalf("summary %+v", s)
	}
	evs := runtest.Events(t, s.RunDir)
	agentReqs := ep.agentRequests()
	if len(agentReqs) != 14 {
		t.Fatalf("%d agent requests, want 14 (12 reads, a recall, finish)", len(agentReqs))
	}
	threshold := int(0.8 * lrWindow)

	t.Run("every request fits the window", func(t *testing.T) {
		for i, r := range srv.Requests() {
			if n := lrTokens(r); n > lrWindow {
				t.Errorf("request %d: %d tokens, over the %d window", i, n, lrWindow)
			}
		}
		// Without compaction the reads would not fit: they are what the
		// model read, together well over the window.
		read := 0
		for _, r := range decodeAll[record.ToolResult](t, evs, record.TypeToolResult) {
			if r.Name == "read_file" && !r.IsError {
				read += len(r.Output)
			}
		}
		if read/4 < 2*lrWindow {
			t.Errorf("the reads came to %d bytes only: too little to need compaction", read)
		}
	})

	cs := lrCompactions(t, evs)
	t.Run("compaction events", func(t *testing.T) {
		if len(cs) == 0 {
			t.Fatal("no compaction event")
		}
		if c := cs[0]; c.Tier != 1 || len(c.Evicted) == 0 || c.Evicted[0] != "call_0_0" || c.Estimated || c.TokensBefore < threshold {
			t.Errorf("first compaction %+v: want tier 1, from reported tokens past %d, evicting the first read", c.Compaction, threshold)
		}
		for i, c := range cs {
			if c.Window != lrWindow {
				t.Errorf("compaction %d: window %d", i, c.Window)
			}
			switch c.Tier {
			case 1:
				if c.TokensAfter >= c.TokensBefore || len(c.Evicted) == 0 {
					t.Errorf("compaction %d: tier 1 %d → %d tokens, evicted %v", i, c.TokensBefore, c.TokensAfter, c.Evicted)
				}
			case 2:
				if i == 0 || cs[i-1].Tier != 1 || cs[i-1].TokensAfter <= c.Target {
					t.Errorf("compaction %d: tier 2 without a tier 1 that missed the target just before it", i)
				}
			}
		}
	})

	t.Run("requests shrink after compaction", func(t *testing.T) {
		for i, c := range cs {
			if c.Tier != 1 {
				continue
			}
			if c.next < 2 || c.next > len(agentReqs) {
				t.Fatalf("compaction %d is followed by no agent request", i)
			}
			prev, next := agentReqs[c.next-2], agentReqs[c.next-1]
			n := lrTokens(next)
			if n >= c.TokensBefore || n >= threshold {
				t.Errorf("compaction %d (%d → %d): the next request has %d tokens, want fewer than before it and than the threshold %d", i, c.TokensBefore, c.TokensAfter, n, threshold)
			}
			// The new request holds one more full read (~16 KB) than the one
			// before it; the eviction must have paid for it.
			if grew := len(next.Raw) - len(prev.Raw); grew > 4<<10 {
				t.Errorf("compaction %d: the request grew by %d bytes", i, grew)
			}
		}
	})

	t.Run("newest intact, oldest stubbed, recall", func(t *testing.T) {
		req := agentReqs[12] // after the twelfth read
		var tools []llmtest.Message
		for _, m := range req.Messages {
			if m.Role == "tool" {
				tools = append(tools, m)
			}
		}
		if len(tools) < 2 {
			t.Fatalf("the request after the last read has %d tool messages", len(tools))
		}
		newest := lrResult(t, evs, "read_file", lrName(12))
		if last := tools[len(tools)-1]; last.Content != newest.Output || !strings.Contains(last.Content, "file 12 line 0001") || !strings.Contains(last.Content, "[/inputs/f12.txt: lines 1-") {
			t.Errorf("the newest result is not intact: %d bytes, recorded %d:\n%.200s", len(last.Content), len(newest.Output), last.Content)
		}
		if o := tools[0].Content; !strings.HasPrefix(o, "[evicted") || !strings.Contains(o, "recall") || !strings.Contains(o, tools[0].ToolCallID) {
			t.Errorf("the oldest result is not a stub naming recall and its ref:\n%.300s", o)
		}
		if bytes.Contains(req.Raw, []byte("file 01 line 0001")) {
			t.Errorf("the first file's body is still in the request")
		}
		first := lrResult(t, evs, "read_file", lrName(1))
		obs := toolReplies(agentReqs[13])
		if len(obs) != 1 || obs[0].Content != first.Output {
			t.Errorf("recall of call_0_0 did not give back the first read (%d bytes): %.200q", len(first.Output), obs)
		}
	})

	t.Run("show", func(t *testing.T) {
		code, out, _ := cli(t, "show", "--home", home, s.RunID)
		if code != 0 || !strings.Contains(out, "compaction:  tier 1, ") {
			t.Errorf("show: exit %d\n%s", code, out)
		}
	})
}

// Tier 2 with summaries of the length its prompt allows (up to 400 words),
// over twenty reads: the context stays bounded — after every compaction the
// request is back under the threshold and none outgrows the window — and
// every compaction event states the tokens after it on the same basis as
// the provider's next report.
//
// It fails today (see the report that came with it): each summary is kept
// as a protected message beside the earlier ones instead of being folded
// into the next, so the context grows by a summary per turn; a summary
// longer than the few messages it condenses still replaces them; and tier
// 2's tokens_after is an estimate of the messages alone, without the tool
// specs that the reported tokens_before include.
func TestLongRunTier2StaysBounded(t *testing.T) {
	home, inputs := t.TempDir(), lrFiles(t, 20, 24<<10)
	ep := &lrReader{files: 20, summary: "Summary: " + strings.Repeat("the agent read another input file and noted its numbered lines; ", 36)}
	srv := llmtest.NewOpenAI(t, ep.policy)
	s := peRun(t, 0, append(openaiArgs(home, srv), "--inputs", inputs, "--context-window", fmt.Sprint(lrWindow), "read every file")...)
	agentReqs := ep.agentRequests()
	cs := lrCompactions(t, runtest.Events(t, s.RunDir))
	summaries := func(req llmtest.Request) int {
		n := 0
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "Summary of earlier work") {
				n++
			}
		}
		return n
	}

	t.Run("bounded", func(t *testing.T) {
		threshold := int(0.8 * lrWindow)
		for i, r := range agentReqs {
			if n := lrTokens(r); n > lrWindow {
				t.Errorf("agent request %d: %d tokens, over the %d window (it carries %d summaries)", i, n, lrWindow, summaries(r))
			}
		}
		for i, c := range cs {
			if c.Tier != 1 || c.next < 1 {
				continue
			}
			if r := agentReqs[c.next-1]; lrTokens(r) >= threshold {
				t.Errorf("compaction %d (tier 1 %d → %d): the next request has %d tokens, not under the threshold %d (it carries %d summaries)",
					i, c.TokensBefore, c.TokensAfter, lrTokens(r), threshold, summaries(r))
			}
		}
	})

	t.Run("a summary never grows the context", func(t *testing.T) {
		for i, c := range cs {
			if c.Tier != 2 || c.Summarized == nil || c.next < 1 {
				continue
			}
			if got := lrTokens(agentReqs[c.next-1]); got >= c.TokensBefore {
				t.Errorf("compaction %d: tier 2 replaced %d messages with a summary at %d tokens, and the next request has %d", i, c.Summarized.Messages, c.TokensBefore, got)
			}
		}
	})

	t.Run("tokens after match the next report", func(t *testing.T) {
		// The last compaction event before each request says what the
		// request will weigh; the provider then reports it.
		for i, c := range cs {
			if c.Tier == 0 || c.next < 1 || (i+1 < len(cs) && cs[i+1].next == c.next) {
				continue
			}
			got := lrTokens(agentReqs[c.next-1])
			if d := got - c.TokensAfter; d > lrWindow/20 || d < -lrWindow/20 {
				t.Errorf("compaction %d (tier %d): tokens_after %d, but the provider then reported %d", i, c.Tier, c.TokensAfter, got)
			}
		}
	})
}

// lrToolFree reports whether req forbids tool calls (tool_choice none).
func lrToolFree(req llmtest.Request) bool {
	return bytes.Contains(req.Raw, []byte(`"tool_choice":"none"`))
}

// lrDeadlineEndpoint writes a note, then hangs on every agent turn; the
// tool-free finalization request is answered with text, or hangs too.
func lrDeadlineEndpoint(finalHangs bool) func(int, llmtest.Request) llmtest.Turn {
	return func(n int, req llmtest.Request) llmtest.Turn {
		switch {
		case lrToolFree(req) && finalHangs:
			return llmtest.Turn{Hang: true}
		case lrToolFree(req):
			return llmtest.Turn{Content: "Partial result: /workspace/notes.txt holds the first findings; the rest is undone."}
		case n == 0:
			return calls(call("write_file", map[string]any{"path": "/workspace/notes.txt", "content": "first findings\n"}))
		}
		return llmtest.Turn{Hang: true}
	}
}

// A slow endpoint that never finishes on its own, against --soft-deadline:
// the run ends at the soft deadline, not the hard timeout, with a tool-free
// last call and a partial result — from the model, or built by the runtime
// when the finalization call hangs too.
func TestLongRunSoftDeadline(t *testing.T) {
	tests := []struct {
		name       string
		finalHangs bool
		source     string
		partial    string // in the partial result
	}{
		{"finalization answers", false, "model", "Partial result: /workspace/notes.txt"},
		{"finalization hangs too", true, "fallback", "/workspace/notes.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			srv := llmtest.NewOpenAI(t, lrDeadlineEndpoint(tt.finalHangs))
			s := peRun(t, 1, append(openaiArgs(home, srv), "--soft-deadline", "2s", "--timeout", "30s", "take your time")...)
			if s.Status != "failed" || s.Termination != "soft_deadline" {
				t.Errorf("status %q termination %q, want soft_deadline (not hard_timeout)", s.Status, s.Termination)
			}
			if !strings.Contains(s.Partial, tt.partial) {
				t.Errorf("partial result %q does not mention %q", s.Partial, tt.partial)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3: a write, a hanging turn, the finalization", len(reqs))
			}
			final := reqs[len(reqs)-1]
			// Tool-free: the tools are listed (the history holds calls, and
			// some providers refuse calls without tools) but none may be
			// called.
			if len(final.Tools) == 0 || !lrToolFree(final) {
				t.Errorf("the last request is not tool-free (tool_choice none): %.300s", final.Raw)
			}
			if m := final.Messages; len(m) == 0 || m[len(m)-1].Role != "user" || !strings.Contains(m[len(m)-1].Content, "soft deadline") {
				t.Errorf("the last request does not end with the finalization prompt: %+v", m)
			}
			if got := fileContent(t, filepath.Join(s.RunDir, "workspace", "notes.txt")); got != "first findings\n" {
				t.Errorf("notes.txt = %q", got)
			}

			evs := runtest.Events(t, s.RunDir)
			prs := decodeAll[record.PartialResult](t, evs, record.TypePartialResult)
			if len(prs) != 1 || prs[0].Source != tt.source || prs[0].Text != s.Partial || (tt.finalHangs != (prs[0].Error != "")) {
				t.Errorf("partial_result events %+v", prs)
			}
			rf := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
			if len(rf) != 1 || rf[0].Termination != "soft_deadline" || rf[0].Partial != s.Partial {
				t.Errorf("run_finished %+v", rf)
			}
			var finalize bool
			for _, o := range decodeAll[record.Observation](t, evs, record.TypeObservation) {
				finalize = finalize || o.Kind == "finalize"
			}
			if !finalize {
				t.Errorf("no finalize observation in the record")
			}
			code, out, _ := cli(t, "show", "--home", home, s.RunID)
			if code != 0 || !strings.Contains(out, "termination: soft_deadline") || !strings.Contains(out, "partial:     "+s.Partial) {
				t.Errorf("show: exit %d\n%s", code, out)
			}
		})
	}
}

// An endpoint that answers 429, then 500, then succeeds: with --retries 3
// the run completes and records two retries; with --retries 2 it ends with
// model_error after one.
func TestLongRunRetries429Then500(t *testing.T) {
	tests := []struct {
		retries string
		code    int
		term    string
		errs    []string // of the model_retry events
	}{
		{"3", 0, "completed", []string{"429", "500"}},
		{"2", 1, "model_error", []string{"429"}},
	}
	for _, tt := range tests {
		t.Run("retries "+tt.retries, func(t *testing.T) {
			home := t.TempDir()
			srv := llmtest.NewOpenAI(t, llmtest.Script(
				llmtest.Turn{Status: 429, RetryAfter: "0"},
				llmtest.Turn{Status: 500},
				calls(call("write_file", map[string]any{"path": "/workspace/done.txt", "content": "done\n"})),
				calls(finish("done after retries")),
			))
			s := peRun(t, tt.code, append(openaiArgs(home, srv), "--retries", tt.retries, "write done.txt")...)
			if s.Termination != tt.term {
				t.Errorf("termination %q, want %q (error %q)", s.Termination, tt.term, s.Error)
			}
			reqs := srv.Requests()
			if len(reqs) < len(tt.errs)+1 {
				t.Fatalf("%d requests", len(reqs))
			}
			for i := 1; i <= len(tt.errs); i++ {
				if !bytes.Equal(reqs[i].Raw, reqs[0].Raw) {
					t.Errorf("attempt %d sent a different body", i+1)
				}
			}
			evs := runtest.Events(t, s.RunDir)
			retries := decodeAll[record.ModelRetry](t, evs, record.TypeModelRetry)
			if len(retries) != len(tt.errs) {
				t.Fatalf("%d model_retry events %+v, want %d", len(retries), retries, len(tt.errs))
			}
			for i, r := range retries {
				if r.Attempt != i+1 || r.Turn != 1 || !strings.Contains(r.Error, tt.errs[i]) {
					t.Errorf("model_retry %d: %+v, want attempt %d of turn 1 failing with %s", i, r, i+1, tt.errs[i])
				}
			}
			if tt.code == 0 {
				if got := fileContent(t, filepath.Join(s.RunDir, "workspace", "done.txt")); got != "done\n" {
					t.Errorf("done.txt = %q", got)
				}
				if len(reqs) != 4 {
					t.Errorf("%d requests, want 4", len(reqs))
				}
			} else {
				errs := decodeAll[record.ModelError](t, evs, record.TypeModelError)
				if len(errs) != 1 || !strings.Contains(errs[0].Error, "500") {
					t.Errorf("model_error events %+v", errs)
				}
			}
		})
	}
}
