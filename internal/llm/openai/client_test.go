package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

// captured is what a fake server saw of one request.
type captured struct {
	path, auth string
	body       map[string]any
}

// jsonServer answers with status, headers and body, recording the request.
func jsonServer(t *testing.T, status int, header http.Header, body string) (string, *captured) {
	t.Helper()
	got := &captured{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got.path, got.auth = r.URL.Path, r.Header.Get("Authorization")
		if err := json.Unmarshal(raw, &got.body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		// These tests build clients without a model (a local server takes
		// any); every other rule of the real API holds.
		if v := strict.CheckOpenAI(raw); v != nil && v.Rule != strict.RuleModel {
			t.Errorf("the client sent a request the Chat Completions API refuses: %v\n%s", v, raw)
		}
		for k, vs := range header {
			w.Header()[k] = vs
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

func asJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestRequestBody(t *testing.T) {
	temp := 0.2
	req := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "be brief"},
			{Role: llm.RoleUser, Content: "list files"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "ls", Arguments: `{"dir":"."}`}}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Name: "ls", Content: "a.go\nb.go"},
			{Role: llm.RoleAssistant, Content: "two files"},
		},
		Tools: []llm.ToolSpec{
			{Name: "ls", Description: "list a directory", Parameters: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)},
			{Name: "now", Description: "the time"},
		},
		MaxOutputTokens: 256,
		Temperature:     &temp,
	}
	wantMessages := `[
		{"role":"system","content":"be brief"},
		{"role":"user","content":"list files"},
		{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\"dir\":\".\"}"}}]},
		{"role":"tool","content":"a.go\nb.go","tool_call_id":"call_1"},
		{"role":"assistant","content":"two files"}]`
	wantTools := `[
		{"type":"function","function":{"name":"ls","description":"list a directory","parameters":{"type":"object","properties":{"dir":{"type":"string"}}}}},
		{"type":"function","function":{"name":"now","description":"the time","parameters":{"type":"object","properties":{}}}}]`

	for _, tt := range []struct {
		name   string
		stream bool
		reply  string
		model  string // Request.Model
		want   string // model sent
	}{
		{name: "streaming", stream: true, reply: sse(text("ok"), stopChunk, done), want: "cfg-model"},
		{name: "plain", reply: `{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`, model: "req-model", want: "req-model"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, got := jsonServer(t, 200, nil, tt.reply)
			c := New(Config{BaseURL: base + "/v1/", APIKey: "sk-test", Model: "cfg-model", Stream: tt.stream})
			r := *req
			r.Model = tt.model
			if _, err := c.Generate(context.Background(), &r); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got.path != "/v1/chat/completions" {
				t.Errorf("path = %q", got.path)
			}
			if got.auth != "Bearer sk-test" {
				t.Errorf("Authorization = %q", got.auth)
			}
			b := got.body
			if b["model"] != tt.want {
				t.Errorf("model = %v, want %v", b["model"], tt.want)
			}
			if !reflect.DeepEqual(b["messages"], asJSON(t, wantMessages)) {
				m, _ := json.Marshal(b["messages"])
				t.Errorf("messages = %s", m)
			}
			if !reflect.DeepEqual(b["tools"], asJSON(t, wantTools)) {
				m, _ := json.Marshal(b["tools"])
				t.Errorf("tools = %s", m)
			}
			if b["max_tokens"] != 256.0 || b["temperature"] != 0.2 {
				t.Errorf("max_tokens = %v, temperature = %v", b["max_tokens"], b["temperature"])
			}
			if _, ok := b["parallel_tool_calls"]; ok {
				t.Error("parallel_tool_calls must not be forced")
			}
			if tt.stream {
				if b["stream"] != true || !reflect.DeepEqual(b["stream_options"], asJSON(t, `{"include_usage":true}`)) {
					t.Errorf("stream = %v, stream_options = %v", b["stream"], b["stream_options"])
				}
			} else if _, ok := b["stream"]; ok {
				t.Errorf("stream sent in plain mode: %v", b["stream"])
			}
		})
	}
}

func TestRequestWithoutKeyOrOptions(t *testing.T) {
	base, got := jsonServer(t, 200, nil, `{"choices":[{"message":{"content":"ok"}}]}`)
	c := New(Config{BaseURL: base})
	if _, err := c.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if got.auth != "" || got.path != "/chat/completions" {
		t.Errorf("auth = %q, path = %q", got.auth, got.path)
	}
	for _, k := range []string{"max_tokens", "temperature", "tools", "stream_options"} {
		if _, ok := got.body[k]; ok {
			t.Errorf("%s sent but not set", k)
		}
	}
}

func TestGeneratePlain(t *testing.T) {
	for _, tt := range []struct {
		name    string
		stream  bool // a streaming client given a JSON reply must read it too
		body    string
		want    *llm.Response
		wantErr error
		wantAPI string
	}{
		{
			name: "content, usage, finish reason",
			body: `{"model":"m-served","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`,
			want: turn("hello", "stop", reported(7, 3)),
		},
		{
			name: "tool calls: missing id, object and malformed arguments",
			body: `{"model":"m-served","choices":[{"index":0,"message":{"content":null,"tool_calls":[
				{"id":"call_x","type":"function","function":{"name":"a","arguments":"{\"k\":1}"}},
				{"type":"function","function":{"name":"b","arguments":{"k":2}}},
				{"id":"call_z","type":"function","function":{"name":"c","arguments":"{\"k\": oops"}}]},"finish_reason":"tool_calls"}]}`,
			want: turn("", "tool_calls", llm.Usage{},
				llm.ToolCall{ID: "call_x", Name: "a", Arguments: `{"k":1}`},
				llm.ToolCall{ID: "call_1", Name: "b", Arguments: `{"k":2}`},
				llm.ToolCall{ID: "call_z", Name: "c", Arguments: `{"k": oops`}),
		},
		{
			name: "content as text parts",
			body: `{"model":"m-served","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`,
			want: turn("ab", "stop", llm.Usage{}),
		},
		{
			name:   "streaming client, server ignored stream",
			stream: true,
			body:   `  {"model":"m-served","choices":[{"message":{"content":"plain"},"finish_reason":"stop"}]}`,
			want:   turn("plain", "stop", llm.Usage{}),
		},
		{name: "empty choices", body: `{"choices":[]}`, wantErr: llm.ErrEmpty},
		{name: "empty body", body: ``, wantErr: llm.ErrEmpty},
		{name: "invalid JSON", body: `{"choices":[{"message":`, wantErr: llm.ErrMalformed},
		{name: "error object with 200", body: `{"error":{"message":"context too long","code":400}}`, wantAPI: "context too long"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, _ := jsonServer(t, 200, nil, tt.body)
			c := New(Config{BaseURL: base, Stream: tt.stream})
			got, err := c.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			switch {
			case tt.wantAPI != "":
				var api *llm.APIError
				if !errors.As(err, &api) || !strings.Contains(api.Message, tt.wantAPI) || api.StatusCode != 400 {
					t.Fatalf("err = %#v, want 400 APIError containing %q", err, tt.wantAPI)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			default:
				if err != nil {
					t.Fatalf("Generate: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got  %+v\nwant %+v", got, tt.want)
				}
			}
		})
	}
	t.Run("malformed error quotes the reply", func(t *testing.T) {
		base, _ := jsonServer(t, 200, nil, `<html>gateway</html>`)
		_, err := New(Config{BaseURL: base}).Generate(context.Background(), &llm.Request{})
		if !errors.Is(err, llm.ErrMalformed) || !strings.Contains(err.Error(), "<html>gateway") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestHTTPErrors(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tt := range []struct {
		name      string
		status    int
		header    http.Header
		body      string
		wantMsg   string
		wantAfter time.Duration
		retryable bool
	}{
		{"429 Retry-After seconds", 429, h("Retry-After", "7"), `{"error":{"message":"slow down","type":"rate_limit"}}`, "slow down", 7 * time.Second, true},
		{"429 retry-after-ms wins", 429, h("Retry-After", "2", "Retry-After-Ms", "1500"), `{"error":{"message":"slow down"}}`, "slow down", 1500 * time.Millisecond, true},
		{"503 Retry-After date", 503, h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), `overloaded`, "overloaded", 30 * time.Second, true},
		{"500 plain text", 500, nil, "upstream exploded\n", "upstream exploded", 0, true},
		{"401 message, key scrubbed", 401, nil, `{"error":{"message":"Incorrect API key provided: sk-secret-key","code":"invalid_api_key"}}`, "Incorrect API key provided: [redacted]", 0, false},
		{"400 vLLM top-level message", 400, nil, `{"object":"error","message":"max_tokens too large","type":"BadRequestError","code":400}`, "max_tokens too large", 0, false},
		{"400 Ollama string error", 400, nil, `{"error":"model not found"}`, "model not found", 0, false},
		{"404 empty body", 404, nil, ``, "Not Found", 0, false},
		{"long body cut", 502, h("Content-Type", "text/html"), "a" + strings.Repeat("é", 2000), "a" + strings.Repeat("é", 249), 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, _ := jsonServer(t, tt.status, tt.header, tt.body)
			c := New(Config{BaseURL: base + "/v1", APIKey: "sk-secret-key", Stream: true})
			c.now = func() time.Time { return now }
			_, err := c.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			var api *llm.APIError
			if !errors.As(err, &api) {
				t.Fatalf("err = %v, want *llm.APIError", err)
			}
			if api.StatusCode != tt.status || api.URL != base+"/v1/chat/completions" {
				t.Errorf("status = %d, URL = %q", api.StatusCode, api.URL)
			}
			if api.Message != tt.wantMsg {
				t.Errorf("message = %q, want %q", api.Message, tt.wantMsg)
			}
			if api.RetryAfter != tt.wantAfter {
				t.Errorf("RetryAfter = %v, want %v", api.RetryAfter, tt.wantAfter)
			}
			if llm.IsRetryable(err) != tt.retryable {
				t.Errorf("IsRetryable = %v", !tt.retryable)
			}
			if strings.Contains(err.Error(), "sk-secret-key") {
				t.Errorf("error leaks the API key: %v", err)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	c := New(Config{BaseURL: base, APIKey: "sk-secret-key", Stream: true})
	_, err := c.Generate(context.Background(), &llm.Request{})
	var ce *llm.ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *llm.ConnError", err)
	}
	if ce.URL != base+"/chat/completions" || !strings.Contains(err.Error(), ce.URL) {
		t.Errorf("ConnError does not name %s/chat/completions: %v", base, err)
	}
	if !llm.IsRetryable(err) || strings.Contains(err.Error(), "sk-secret-key") {
		t.Errorf("retryable = %v, err = %v", llm.IsRetryable(err), err)
	}
}

// TestServerDropsStream: the connection dies mid-stream (no final chunk).
func TestServerDropsStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sse(text("partial")))
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	_, err := New(Config{BaseURL: srv.URL, Stream: true}).Generate(context.Background(), &llm.Request{})
	if !errors.Is(err, llm.ErrTruncated) || !llm.IsRetryable(err) {
		t.Fatalf("err = %v, want retryable ErrTruncated", err)
	}
}

// TestContextEnds: cancellation and deadlines surface as ctx errors, never as
// ConnError, whether the server is silent or stalls mid-stream.
func TestContextEnds(t *testing.T) {
	for _, tt := range []struct {
		name     string
		midway   bool // send headers and one chunk before stalling
		deadline bool
		want     error
	}{
		{name: "cancel, no answer", want: context.Canceled},
		{name: "cancel mid-stream", midway: true, want: context.Canceled},
		{name: "deadline, no answer", deadline: true, want: context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.midway {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, sse(text("thinking")))
					_ = http.NewResponseController(w).Flush()
				}
				arrived <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.deadline {
				var stop context.CancelFunc
				ctx, stop = context.WithTimeout(ctx, 50*time.Millisecond)
				defer stop()
			} else {
				go func() {
					select {
					case <-arrived:
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			_, err := New(Config{BaseURL: srv.URL, Stream: true}).Generate(ctx, &llm.Request{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var ce *llm.ConnError
			if errors.As(err, &ce) {
				t.Errorf("ctx end reported as ConnError: %v", err)
			}
		})
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		ra, ms string
		want   time.Duration
	}{
		{"", "", 0},
		{"0", "", 0},
		{"-5", "", 0},
		{"1.5", "", 1500 * time.Millisecond},
		{"soon", "", 0},
		{now.Add(-time.Minute).Format(http.TimeFormat), "", 0},
		{"", "250", 250 * time.Millisecond},
		{"3", "garbage", 3 * time.Second},
	} {
		h := http.Header{}
		if tt.ra != "" {
			h.Set("Retry-After", tt.ra)
		}
		if tt.ms != "" {
			h.Set("retry-after-ms", tt.ms)
		}
		if got := retryAfter(h, now); got != tt.want {
			t.Errorf("Retry-After %q, ms %q: got %v, want %v", tt.ra, tt.ms, got, tt.want)
		}
	}
}

// context_length_exceeded is an overflow the runtime can act on.
func TestContextLengthExceededIsOverflow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
	}))
	defer srv.Close()
	_, err := New(Config{BaseURL: srv.URL, Model: "m"}).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	o, over := llm.IsContextOverflow(err)
	if !over || o.Limit != 8192 || o.Prompt != 9001 || llm.IsRetryable(err) {
		t.Fatalf("err = %v, overflow %v %+v", err, over, o)
	}
}
