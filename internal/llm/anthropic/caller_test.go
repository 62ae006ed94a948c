package anthropic

import (
	"context"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

func TestCallerHeaders(t *testing.T) {
	srv, rec := fakeServer(t, reply{body: `{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`})
	c := New(Config{BaseURL: srv.URL, APIKey: testKey, Model: "m"})
	ctx := llm.WithCaller(context.Background(), llm.Caller{Run: "r-9", Agent: "verifier", Role: llm.CallerVerifier})
	if _, err := c.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	h, _, _ := rec.last(t)
	if h.Get("X-Apodex-Run") != "r-9" || h.Get("X-Apodex-Agent") != "verifier" || h.Get("X-Apodex-Role") != "verifier" {
		t.Errorf("headers %v", h)
	}
}
