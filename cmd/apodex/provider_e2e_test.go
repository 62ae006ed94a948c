package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// An endpoint whose window is smaller than --context-window answers a long
// prompt with OpenAI's context_length_exceeded: the run compacts, sends a
// shorter prompt, learns the window and completes.
func TestEndpointOverflowCompactsAndCompletes(t *testing.T) {
	const limit = 16000 // tokens, as len(body)/4
	home, inputs := t.TempDir(), lrFiles(t, 10, 24<<10)
	var refused []int
	srv := llmtest.NewOpenAI(t, func(_ int, req llmtest.Request) llmtest.Turn {
		if len(req.Tools) == 0 { // a summary request
			return llmtest.Turn{Content: "Summary: read files f01 to f10 with read_file.", Usage: lrUsage(req)}
		}
		if n := lrTokens(req); n > limit {
			refused = append(refused, n)
			return llmtest.Turn{Status: 400, Body: fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, limit, n)}
		}
		read := 0
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				if c.Name == "read_file" {
					read++
				}
			}
		}
		if read < 10 {
			return llmtest.Turn{Calls: []llm.ToolCall{call("read_file", map[string]any{"path": "/inputs/" + lrName(read+1)})}, Usage: lrUsage(req)}
		}
		return llmtest.Turn{Calls: []llm.ToolCall{finish("read all ten")}, Usage: lrUsage(req)}
	})
	s := peRun(t, 0, append(openaiArgs(home, srv), "--inputs", inputs, "--context-window", "1000000", "read every file")...)
	if s.Status != "completed" || len(refused) == 0 {
		t.Fatalf("status %s after %d refusals", s.Status, len(refused))
	}
	reqs := srv.Requests()
	for i := 0; i+1 < len(reqs); i++ {
		if lrTokens(reqs[i]) > limit && len(reqs[i].Tools) > 0 && lrTokens(reqs[i+1]) >= lrTokens(reqs[i]) {
			t.Fatalf("request %d (%d tokens) was refused and the next is not shorter (%d)", i, lrTokens(reqs[i]), lrTokens(reqs[i+1]))
		}
	}
	var forced int
	for _, c := range decodeAll[record.Compaction](t, runtest.Events(t, s.RunDir), record.TypeCompaction) {
		if c.Reason == record.ReasonProviderOverflow {
			forced++
			if c.Window != limit || !strings.Contains(c.ProviderError, "context length") {
				t.Fatalf("the compaction did not learn the provider's window: %+v", c)
			}
		}
	}
	if forced == 0 {
		t.Fatal("no compaction with reason provider_overflow in the record")
	}
	if len(refused) > forced {
		t.Fatalf("%d refusals for %d forced compactions: the learned window did not keep later prompts under it", len(refused), forced)
	}
}

// A streamed reply of garbage is named for what it is, after at most three
// attempts.
func TestEndpointGarbageStream(t *testing.T) {
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Body: "<html><body>upstream gateway error</body></html>\n"}
	})
	s := peRun(t, 1, append(openaiArgs(home, srv), "say hi")...)
	if s.Termination != "model_error" || !strings.Contains(s.Error, "sent a line that is not SSE/JSON") || !strings.Contains(s.Error, "upstream gateway error") {
		t.Fatalf("termination %s, error %q", s.Termination, s.Error)
	}
	if n := len(srv.Requests()); n > 3 {
		t.Fatalf("%d attempts at a reply that is not a stream, want at most 3", n)
	}
}

// doctor says an endpoint's HTTP 500 is a server error, not a refusal of
// the tools field.
func TestDoctorServerError(t *testing.T) {
	clearModelEnv(t)
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn { return llmtest.Turn{Status: 500} })
	srv.SetModels("m")
	_, out, _ := cli(t, "doctor", "--home", t.TempDir(), "--provider", "openai", "--base-url", srv.URL, "--model", "m")
	if !regexpLine(out, `FAIL\s+endpoint\s+tool-call probe: the server failed with HTTP 500 \(a 5xx`) || strings.Contains(out, "refused a request with tools") {
		t.Fatalf("doctor output:\n%s", out)
	}
}
