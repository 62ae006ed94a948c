package openai

import (
	"context"
	"reflect"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

// Reasoning in either field OpenAI-compatible servers use, cached and
// reasoning token counts and the reply id are kept, streamed or not.
func TestReasoningCacheAndID(t *testing.T) {
	want := func(reasoning string) *llm.Response {
		r := turn("answer", "stop", llm.Usage{PromptTokens: 50, CompletionTokens: 30, TotalTokens: 80, CachedTokens: 40, ReasoningTokens: 12, Reported: true})
		r.ID, r.Message.Reasoning = "chatcmpl-7", reasoning
		return r
	}
	usage := `"usage":{"prompt_tokens":50,"completion_tokens":30,"total_tokens":80,"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":12}}`
	tests := []struct {
		name   string
		stream bool
		body   string
	}{
		{"whole reply, reasoning_content (vLLM, llama.cpp)", false,
			`{"id":"chatcmpl-7","model":"m-served","choices":[{"index":0,"message":{"role":"assistant","content":"answer","reasoning_content":"think first"},"finish_reason":"stop"}],` + usage + `}`},
		{"whole reply, reasoning (OpenRouter, Ollama)", false,
			`{"id":"chatcmpl-7","model":"m-served","choices":[{"index":0,"message":{"role":"assistant","content":"answer","reasoning":"think first"},"finish_reason":"stop"}],` + usage + `}`},
		{"stream, reasoning_content deltas", true, sse(
			`{"id":"chatcmpl-7","model":"m-served","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think "}}]}`,
			`{"id":"chatcmpl-7","model":"m-served","choices":[{"index":0,"delta":{"reasoning_content":"first"}}]}`,
			`{"id":"chatcmpl-7","model":"m-served","choices":[{"index":0,"delta":{"content":"answer"},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-7","model":"m-served","choices":[],`+usage+`}`,
			`[DONE]`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *Client
			if tt.stream {
				c = streamServer(t, tt.body)
			} else {
				base, _ := jsonServer(t, 200, nil, tt.body)
				c = New(Config{BaseURL: base})
			}
			got, err := c.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want("think first")) {
				t.Errorf("got  %+v\nwant %+v", got, want("think first"))
			}
		})
	}
}

// Reasoning is not sent back: OpenAI-compatible servers need no echo, and
// a strict one rejects the unknown field.
func TestReasoningNotSentBack(t *testing.T) {
	w := buildMessage(llm.Message{Role: llm.RoleAssistant, Content: "a", Reasoning: "r", Thinking: []llm.Thinking{{Type: "thinking", Text: "r", Signature: "s"}}})
	if !reflect.DeepEqual(w, wireMessage{Role: "assistant", Content: "a"}) {
		t.Errorf("wire message %+v", w)
	}
}
