package llmtest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
)

// A streaming client hands the assistant's text to the context's TextSink
// as it reads it, with the caller; the text adds up to the reply's, and
// the reply is the same as without a sink. A whole (not streamed) reply
// sends nothing.
func TestTextSinkGetsTheStreamedText(t *testing.T) {
	const text = "Summing the column now, then writing the report."
	for _, b := range backends {
		for _, stream := range []bool{true, false} {
			t.Run(b.name, func(t *testing.T) {
				srv := b.start(t, llmtest.Script(llmtest.Turn{Content: text}, llmtest.Turn{Content: text}))
				c := b.client(srv.URL, stream)
				req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: "go"}}}
				var mu sync.Mutex
				var got strings.Builder
				var who string
				ctx := llm.WithCaller(context.Background(), llm.Caller{Run: "r", Agent: "A1", Role: llm.CallerSubagent})
				ctx = llm.WithTextSink(ctx, func(c llm.Caller, delta string) {
					mu.Lock()
					defer mu.Unlock()
					got.WriteString(delta)
					who = c.Agent
				})
				with, err := c.Generate(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				without, err := c.Generate(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if with.Message.Content != text || without.Message.Content != text {
					t.Errorf("replies %q and %q", with.Message.Content, without.Message.Content)
				}
				switch {
				case stream && (got.String() != text || who != "A1"):
					t.Errorf("streamed: the sink got %q from %q", got.String(), who)
				case !stream && got.Len() != 0:
					t.Errorf("not streamed: the sink got %q", got.String())
				}
			})
		}
	}
}
