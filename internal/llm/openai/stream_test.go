package openai

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

// sse frames each payload as one "data:" event.
func sse(payloads ...string) string {
	var b strings.Builder
	for _, p := range payloads {
		b.WriteString("data: " + p + "\n\n")
	}
	return b.String()
}

// streamServer answers every request with body as an event stream.
func streamServer(t *testing.T, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return New(Config{BaseURL: srv.URL + "/v1", Model: "m", Stream: true})
}

func turn(content string, finish string, usage llm.Usage, calls ...llm.ToolCall) *llm.Response {
	return &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Content: content, ToolCalls: calls},
		Usage:        usage,
		FinishReason: finish,
		Model:        "m-served",
	}
}

func reported(p, c int) llm.Usage {
	return llm.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c, Reported: true}
}

const (
	roleChunk  = `{"model":"m-served","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`
	stopChunk  = `{"model":"m-served","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	toolsChunk = `{"model":"m-served","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	usageChunk = `{"model":"m-served","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	done       = `[DONE]`
)

func text(s string) string {
	return `{"model":"m-served","choices":[{"index":0,"delta":{"content":` + quote(s) + `}}]}`
}

// tc is a tool-call delta; empty id/name are left out like real servers do.
func tc(index int, id, name, args string) string {
	fn := `"arguments":` + quote(args)
	if name != "" {
		fn = `"name":` + quote(name) + `,` + fn
	}
	call := `"index":` + strconv.Itoa(index) + `,"function":{` + fn + `}`
	if id != "" {
		call = `"id":` + quote(id) + `,"type":"function",` + call
	}
	return `{"model":"m-served","choices":[{"index":0,"delta":{"tool_calls":[{` + call + `}]}}]}`
}

func quote(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var streamCases = []struct {
	name    string
	body    string
	want    *llm.Response
	wantErr error  // sentinel the error must wrap
	wantAPI string // substring of an *llm.APIError message
}{
	{
		name: "text with usage in final empty-choices chunk",
		body: sse(roleChunk, text("Hel"), text("lo"), stopChunk, usageChunk, done),
		want: turn("Hello", "stop", reported(10, 5)),
	},
	{
		name: "tool call split across chunks",
		body: sse(roleChunk,
			tc(0, "call_a", "read_file", ""),
			tc(0, "", "", `{"pa`), tc(0, "", "", `th":"a`), tc(0, "", "", `.go"}`),
			toolsChunk, usageChunk, done),
		want: turn("", "tool_calls", reported(10, 5),
			llm.ToolCall{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.go"}`}),
	},
	{
		name: "two parallel calls interleaved by index",
		body: sse(
			tc(0, "call_a", "read", ""), tc(1, "call_b", "write", ""),
			tc(0, "", "", `{"p":`), tc(1, "", "", `{"q":`),
			tc(1, "", "", `2}`), tc(0, "", "", `1}`),
			toolsChunk, done),
		want: turn("", "tool_calls", llm.Usage{},
			llm.ToolCall{ID: "call_a", Name: "read", Arguments: `{"p":1}`},
			llm.ToolCall{ID: "call_b", Name: "write", Arguments: `{"q":2}`}),
	},
	{
		name: "content and tool calls in one reply",
		body: sse(text("Let me look."), tc(0, "call_a", "ls", `{}`), toolsChunk, usageChunk, done),
		want: turn("Let me look.", "tool_calls", reported(10, 5),
			llm.ToolCall{ID: "call_a", Name: "ls", Arguments: `{}`}),
	},
	{
		name: "usage on the last choice chunk",
		body: sse(text("hi"),
			`{"model":"m-served","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			done),
		want: turn("hi", "stop", reported(3, 1)),
	},
	{
		name: "CRLF, comments, event and id lines",
		body: strings.ReplaceAll(": keep-alive\n\nevent: message\nid: 1\nretry: 10\n"+
			sse(text("a"), text("b"), stopChunk)+"data:[DONE]\n\n", "\n", "\r\n"),
		want: turn("ab", "stop", llm.Usage{}),
	},
	{
		name: "no blank lines between events",
		body: "data: " + text("x") + "\ndata: " + text("y") + "\ndata: " + stopChunk + "\ndata: [DONE]\n",
		want: turn("xy", "stop", llm.Usage{}),
	},
	{
		name: "one event split over several data lines",
		body: "data: {\"model\":\"m-served\",\ndata: \"choices\":[{\"index\":0,\"delta\":{\"content\":\"z\"},\"finish_reason\":\"stop\"}]}\n\n",
		want: turn("z", "stop", llm.Usage{}),
	},
	{
		name: "finish reason without [DONE]",
		body: sse(text("ok"), stopChunk),
		want: turn("ok", "stop", llm.Usage{}),
	},
	{
		name: "missing ids get call_<n>",
		body: sse(tc(0, "", "a", `{}`), tc(1, "", "b", `{}`), toolsChunk, done),
		want: turn("", "tool_calls", llm.Usage{},
			llm.ToolCall{ID: "call_0", Name: "a", Arguments: `{}`},
			llm.ToolCall{ID: "call_1", Name: "b", Arguments: `{}`}),
	},
	{
		name: "malformed arguments pass through verbatim",
		body: sse(tc(0, "call_a", "edit", `{"path": "a.go", `), tc(0, "", "", `"text": oops`), toolsChunk, done),
		want: turn("", "tool_calls", llm.Usage{},
			llm.ToolCall{ID: "call_a", Name: "edit", Arguments: `{"path": "a.go", "text": oops`}),
	},
	{
		name: "every call at index 0 with distinct ids",
		body: sse(tc(0, "call_a", "a", `{"x":1}`), tc(0, "call_b", "b", `{"y":2}`), toolsChunk, done),
		want: turn("", "tool_calls", llm.Usage{},
			llm.ToolCall{ID: "call_a", Name: "a", Arguments: `{"x":1}`},
			llm.ToolCall{ID: "call_b", Name: "b", Arguments: `{"y":2}`}),
	},
	{
		name: "line of several megabytes",
		body: sse(tc(0, "call_a", "write", `{"text":"`+strings.Repeat("x", 5<<20)+`"}`), toolsChunk, done),
		want: turn("", "tool_calls", llm.Usage{},
			llm.ToolCall{ID: "call_a", Name: "write", Arguments: `{"text":"` + strings.Repeat("x", 5<<20) + `"}`}),
	},
	{
		name: "finish reason normalized",
		body: sse(`{"model":"m-served","choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"max_tokens"}]}`, done),
		want: turn("c", "length", llm.Usage{}),
	},
	{
		name:    "ends without [DONE] or finish reason",
		body:    sse(roleChunk, text("partial")),
		wantErr: llm.ErrTruncated,
	},
	{
		name:    "ends mid-event",
		body:    sse(text("partial")) + `data: {"choices":[{"index":0,"del`,
		wantErr: llm.ErrTruncated,
	},
	{
		name:    "empty body",
		body:    "",
		wantErr: llm.ErrTruncated,
	},
	{
		name:    "[DONE] without any choice",
		body:    sse(usageChunk, done),
		wantErr: llm.ErrEmpty,
	},
	{
		name:    "malformed chunk",
		body:    "data: {\"choices\": nope}\n\n",
		wantErr: llm.ErrMalformed,
	},
	{
		name:    "error object mid-stream",
		body:    sse(text("a"), `{"error":{"message":"model overloaded","type":"server_error","code":null}}`),
		wantAPI: "model overloaded",
	},
}

func TestGenerateStream(t *testing.T) {
	for _, tt := range streamCases {
		t.Run(tt.name, func(t *testing.T) {
			c := streamServer(t, tt.body)
			got, err := c.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			switch {
			case tt.wantAPI != "":
				var api *llm.APIError
				if !errors.As(err, &api) || !strings.Contains(api.Message, tt.wantAPI) {
					t.Fatalf("err = %v, want APIError containing %q", err, tt.wantAPI)
				}
				if api.URL != c.url {
					t.Errorf("URL = %q, want %q", api.URL, c.url)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if !llm.IsRetryable(err) && tt.wantErr != llm.ErrMalformed {
					t.Errorf("err %v should be retryable", err)
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
}

func FuzzStream(f *testing.F) {
	for _, tt := range streamCases {
		if len(tt.body) < 1<<16 {
			f.Add([]byte(tt.body))
		}
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-3,\"function\":{\"arguments\":{\"a\":[1]}}}]}}]}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":[{\"text\":\"a\"},\"b\"]},\"finish_reason\":\"stop\"}]}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := parseStream(bytes.NewReader(data), "http://fuzz/v1/chat/completions")
		if err != nil {
			var api *llm.APIError
			if resp != nil {
				t.Fatal("both a response and an error")
			}
			if !errors.Is(err, llm.ErrTruncated) && !errors.Is(err, llm.ErrEmpty) &&
				!errors.Is(err, llm.ErrMalformed) && !errors.As(err, &api) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if resp.Message.Role != llm.RoleAssistant {
			t.Fatalf("role = %q", resp.Message.Role)
		}
		for _, call := range resp.Message.ToolCalls {
			if call.ID == "" {
				t.Fatalf("tool call without id: %+v", call)
			}
		}
	})
}

// A body that is not an SSE stream is named as such, with its first bytes,
// and not taken for a truncated stream.
func TestStreamThatIsNotSSE(t *testing.T) {
	for name, body := range map[string]string{
		"html page":       "<html><body>502 Bad Gateway</body></html>\n",
		"plain text":      "upstream connect error or disconnect/reset before headers\n",
		"data not json":   "data: hello there\n\ndata: still not json\n\n",
		"garbage after a": "data: {\"choices\":[]}\n\nwhat is this\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseStream(strings.NewReader(body), "http://x/v1/chat/completions")
			var bad *llm.BadStreamError
			if !errors.As(err, &bad) || !strings.Contains(err.Error(), "not SSE/JSON") || llm.IsRetryable(err) == false {
				t.Fatalf("err = %v", err)
			}
			if errors.Is(err, llm.ErrTruncated) {
				t.Fatalf("reported as truncated: %v", err)
			}
		})
	}
}
