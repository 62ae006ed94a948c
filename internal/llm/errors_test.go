package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A reply that is not a stream is tried three times at most, whatever the
// policy allows, and the error names what the endpoint sent.
func TestBadStreamIsTriedThreeTimes(t *testing.T) {
	bad := NewBadStream("http://model.test/v1/chat/completions", []byte("<html><body>502 Bad Gateway</body></html>"))
	seq := &sequence{errs: []error{bad, bad, bad, bad, bad, bad}}
	clk := &fakeClock{now: time.Unix(0, 0)}
	_, err := WithRetry(seq, RetryPolicy{MaxAttempts: 6, Clock: clk, Rand: func() float64 { return 0 }}).Generate(context.Background(), &Request{})
	if seq.calls != 3 {
		t.Fatalf("attempts = %d, want 3", seq.calls)
	}
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "sent a line that is not SSE/JSON") || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Fatalf("error = %v", err)
	}
	// A stream error between good attempts does not use up the others.
	seq = &sequence{errs: []error{status(503), bad, status(503), status(503)}}
	if _, err := WithRetry(seq, RetryPolicy{MaxAttempts: 6, Clock: clk}).Generate(context.Background(), &Request{}); err != nil || seq.calls != 5 {
		t.Fatalf("mixed errors: %d calls, %v", seq.calls, err)
	}
}

func TestDetectOverflow(t *testing.T) {
	tests := []struct {
		name          string
		status        int
		code, message string
		want          bool
		limit, prompt int
	}{
		{"openai", 400, "context_length_exceeded", "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.", true, 128000, 130512},
		{"vllm", 400, "BadRequestError", "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", true, 4096, 4000},
		{"vllm newer", 400, "", "The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens.", true, 8192, 0},
		{"llama.cpp", 400, "exceed_context_size_error", `{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}`, true, 4096, 5000},
		{"anthropic", 400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", true, 200000, 210000},
		{"anthropic body too large", 413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", true, 0, 0},
		{"another 400", 400, "invalid_request_error", "messages.1: tool_result block(s) provided when previous message does not have any tool_use blocks", false, 0, 0},
		{"a 500 about context", 500, "", "maximum context length exceeded in the worker", false, 0, 0},
		{"max_tokens too large", 400, "invalid_request_error", "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude", false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := DetectOverflow(tt.status, tt.code, tt.message)
			if ok != tt.want || o.Limit != tt.limit || o.Prompt != tt.prompt {
				t.Fatalf("got %+v %v, want limit %d prompt %d %v", o, ok, tt.limit, tt.prompt, tt.want)
			}
			api := (&APIError{StatusCode: tt.status, Code: tt.code, Message: tt.message}).Classify("")
			if _, over := IsContextOverflow(api); over != tt.want || (over && IsRetryable(api)) {
				t.Fatalf("classified %v (retryable %v)", over, IsRetryable(api))
			}
		})
	}
}

func TestProblemsAndRepair(t *testing.T) {
	call := func(id string) ToolCall { return ToolCall{ID: id, Name: "wait"} }
	tests := []struct {
		name     string
		in       []Message
		problems int
		roles    string
	}{
		{"valid parallel turn", []Message{{Role: RoleSystem}, {Role: RoleUser, Content: "t"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{call("a"), call("b")}}, {Role: RoleTool, ToolCallID: "a"}, {Role: RoleTool, ToolCallID: "b"},
			{Role: RoleUser, Content: "more"}}, 0, "system user assistant tool tool user"},
		{"a result after a summary", []Message{{Role: RoleUser, Content: "summary"}, {Role: RoleTool, ToolCallID: "w1", Name: "wait", Content: "report"}},
			1, "user user"},
		{"a call without its result", []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("a"), call("b")}}, {Role: RoleTool, ToolCallID: "a"}, {Role: RoleUser, Content: "x"}},
			1, "assistant tool tool user"},
		{"a stray result inside a turn goes after it", []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("a")}}, {Role: RoleTool, ToolCallID: "zz"}, {Role: RoleTool, ToolCallID: "a"}},
			1, "assistant tool user"},
		{"a result answered twice", []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("a")}}, {Role: RoleTool, ToolCallID: "a"}, {Role: RoleTool, ToolCallID: "a"}},
			1, "assistant tool user"},
		{"a dangling call at the end", []Message{{Role: RoleUser}, {Role: RoleAssistant, ToolCalls: []ToolCall{call("a")}}}, 1, "user assistant tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(Problems(tt.in)); got != tt.problems {
				t.Fatalf("problems = %d (%v), want %d", got, Problems(tt.in), tt.problems)
			}
			out := Repair(tt.in)
			var roles []string
			for _, m := range out {
				roles = append(roles, string(m.Role))
			}
			if got := strings.Join(roles, " "); got != tt.roles {
				t.Fatalf("repaired roles %q, want %q", got, tt.roles)
			}
			if p := Problems(out); p != nil {
				t.Fatalf("the repair is not valid: %v", p)
			}
		})
	}
}
