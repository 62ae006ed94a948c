package anthropic

import (
	"errors"
	"reflect"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

const msgStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":5}}}`

// twoToolStream is text then two tool_use blocks whose input arrives in
// pieces, interleaved, with a ping in between.
var twoToolStream = ev("message_start", msgStart) +
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
	ev("ping", `{"type":"ping"}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}`) +
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
	ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}`) +
	ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"grep","input":{}}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"pattern\":"}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"th\": \"a.go\""}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":" \"x<y\", \"n\": 3}"}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"}"}}`) +
	ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
	ev("content_block_stop", `{"type":"content_block_stop","index":2}`) +
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`) +
	ev("message_stop", `{"type":"message_stop"}`)

var textStream = ev("message_start", msgStart) +
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`) +
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`) +
	ev("message_stop", `{"type":"message_stop"}`)

func TestGenerate(t *testing.T) {
	twoTools := &llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Content: "Let me check.", ToolCalls: []llm.ToolCall{
			{ID: "toolu_1", Name: "read_file", Arguments: `{"path":"a.go"}`},
			{ID: "toolu_2", Name: "grep", Arguments: `{"pattern":"x<y","n":3}`},
		}},
		Usage:        llm.Usage{PromptTokens: 30, CompletionTokens: 42, TotalTokens: 72, CachedTokens: 5, Reported: true},
		FinishReason: "tool_calls",
		Model:        "claude-test",
		ID:           "msg_1",
	}
	hi := &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Content: "Hi"},
		Usage:        llm.Usage{PromptTokens: 30, CompletionTokens: 7, TotalTokens: 37, CachedTokens: 5, Reported: true},
		FinishReason: "stop",
		Model:        "claude-test",
		ID:           "msg_1",
	}
	hiJSON := *hi
	hiJSON.Usage.CachedTokens, hiJSON.ID = 0, ""
	tests := []struct {
		name    string
		stream  bool
		body    string
		want    *llm.Response
		wantErr error // matched with errors.Is
		status  int   // wanted *llm.APIError status, 0 for none
	}{
		{name: "stream text and two tool_use blocks in pieces", stream: true, body: twoToolStream, want: twoTools},
		{name: "stream usage from message_start and message_delta", stream: true, body: textStream, want: hi},
		{name: "stream without trailing blank line", stream: true, body: textStream[:len(textStream)-1], want: hi},
		{name: "stream tool_use without input deltas means {}", stream: true, body: ev("message_start", msgStart) +
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"now","input":{}}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`) +
			ev("message_stop", `{"type":"message_stop"}`),
			want: &llm.Response{
				Message:      llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t", Name: "now", Arguments: "{}"}}},
				Usage:        llm.Usage{PromptTokens: 30, CompletionTokens: 3, TotalTokens: 33, CachedTokens: 5, Reported: true},
				FinishReason: "tool_calls", Model: "claude-test", ID: "msg_1",
			}},
		{name: "stream thinking with its signature, then text", stream: true, body: ev("message_start", msgStart) +
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Two "}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"files."}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"ENC"}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
			ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":"Hi"}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":2}`) +
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`) +
			ev("message_stop", `{"type":"message_stop"}`),
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Content: "Hi", Reasoning: "Two files.",
					Thinking: []llm.Thinking{{Type: "thinking", Text: "Two files.", Signature: "EqQB"}, {Type: "redacted_thinking", Data: "ENC"}}},
				Usage:        llm.Usage{PromptTokens: 30, CompletionTokens: 7, TotalTokens: 37, CachedTokens: 5, Reported: true},
				FinishReason: "stop", Model: "claude-test", ID: "msg_1",
			}},
		{name: "stream truncated", stream: true, body: textStream[:len(textStream)-len(ev("message_stop", `{"type":"message_stop"}`))], wantErr: llm.ErrTruncated},
		{name: "stream cut mid-line", stream: true, body: textStream[:len(textStream)-5], wantErr: llm.ErrTruncated},
		{name: "stream error event", stream: true, body: ev("message_start", msgStart) +
			ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), status: 529},
		{name: "stream invalid JSON", stream: true, body: ev("message_start", `{"type":`), wantErr: llm.ErrMalformed},
		{name: "stream delta for unknown block", stream: true, body: ev("message_start", msgStart) +
			ev("content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}`), wantErr: llm.ErrMalformed},
		{name: "stream with nothing at all", stream: true, body: ev("message_start", msgStart) + ev("message_stop", `{"type":"message_stop"}`), wantErr: llm.ErrEmpty},
		{name: "stream asked, JSON answered", stream: true,
			body: `{"model":"claude-test","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":30,"output_tokens":7}}`, want: &hiJSON},
		{name: "tool_use", body: `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test",
			"content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_9","name":"read_file","input":{"path": "b.go", "n": 12345678901234567890}}],
			"stop_reason":"tool_use","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":5}}`,
			want: &llm.Response{
				Message: llm.Message{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: []llm.ToolCall{
					{ID: "toolu_9", Name: "read_file", Arguments: `{"path":"b.go","n":12345678901234567890}`}},
					Reasoning: "hmm", Thinking: []llm.Thinking{{Type: "thinking", Text: "hmm", Signature: "sig"}}},
				// Prompt tokens are all input; the cache's share apart.
				Usage:        llm.Usage{PromptTokens: 1110, CompletionTokens: 5, TotalTokens: 1115, CachedTokens: 1000, CacheCreationTokens: 100, Reported: true},
				FinishReason: "tool_calls", Model: "claude-test", ID: "msg_2",
			}},
		{name: "max_tokens", body: `{"model":"m","content":[{"type":"text","text":"cut"}],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":2}}`,
			want: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "cut"},
				Usage: llm.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, Reported: true}, FinishReason: "length", Model: "m"}},
		{name: "empty content with end_turn is a valid empty turn", body: `{"model":"m","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":0}}`,
			want: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant},
				Usage: llm.Usage{PromptTokens: 1, TotalTokens: 1, Reported: true}, FinishReason: "stop", Model: "m"}},
		{name: "no usage, model from request", body: `{"content":[{"type":"text","text":"x"}],"stop_reason":"stop_sequence"}`,
			want: &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "x"}, FinishReason: "stop", Model: "claude-cfg"}},
		{name: "empty content and no stop reason", body: `{"model":"m","content":[],"stop_reason":null}`, wantErr: llm.ErrEmpty},
		{name: "invalid JSON", body: `{"content":[`, wantErr: llm.ErrMalformed},
		{name: "error object in a 200", body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, status: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fakeServer(t, reply{body: tt.body})
			c := New(Config{BaseURL: srv.URL, APIKey: testKey, Model: "claude-cfg", Stream: tt.stream})
			got, err := c.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			switch {
			case tt.status != 0:
				var api *llm.APIError
				if !errors.As(err, &api) || api.StatusCode != tt.status {
					t.Fatalf("err = %v, want *llm.APIError with status %d", err, tt.status)
				}
				if !llm.IsRetryable(err) {
					t.Errorf("error %v should be retryable", err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Generate: %v", err)
			case !reflect.DeepEqual(got, tt.want):
				t.Fatalf("response\ngot  %+v\nwant %+v", got, tt.want)
			}
			if err != nil && got != nil {
				t.Errorf("got a response %+v together with error %v", got, err)
			}
		})
	}
}
