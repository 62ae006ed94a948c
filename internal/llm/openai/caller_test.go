package openai

import (
	"context"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
)

func TestCallerHeaders(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Content: "a"}, llmtest.Turn{Content: "b"}))
		c := New(Config{BaseURL: srv.URL, Model: "m", Stream: stream})
		ctx := llm.WithCaller(context.Background(), llm.Caller{Run: "r-1"})
		ctx = llm.WithCaller(ctx, llm.Caller{Agent: "A2", Role: llm.CallerSubagent})
		if _, err := c.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		// No caller: no headers (never an empty value).
		if _, err := c.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		h := reqs[0].Header
		if h.Get("X-Apodex-Run") != "r-1" || h.Get("X-Apodex-Agent") != "A2" || h.Get("X-Apodex-Role") != "subagent" {
			t.Errorf("stream=%v: headers %v", stream, h)
		}
		for _, k := range []string{"X-Apodex-Run", "X-Apodex-Agent", "X-Apodex-Role"} {
			if _, ok := reqs[1].Header[k]; ok {
				t.Errorf("stream=%v: %s sent without a caller", stream, k)
			}
		}
	}
}
