// Package llmtest provides fake model endpoints for tests: an
// OpenAI-compatible Chat Completions server on loopback whose every answer is
// chosen by a Go policy.
//
// Guarantees of the server made by NewOpenAI:
//   - it answers POST <URL>/chat/completions only; any other method or path
//     (a sandbox escaping to the host, a client building the wrong URL) fails
//     the test and gets 404;
//   - requests are numbered 0, 1, 2, … in arrival order and the policy is
//     called once per request, under a lock, with that number; Requests
//     returns every decoded body in the same order;
//   - a Turn is answered as the client asked: SSE when the request says
//     "stream": true, one JSON object otherwise. A streamed turn sends the
//     role first, the content in two pieces, then each tool call as a header
//     chunk (index, id, name) followed by its arguments in up to three
//     pieces, the calls of one turn interleaved by index; then a chunk with
//     the finish reason, then — only when stream_options.include_usage is
//     set, as OpenAI does — usage in a final chunk with empty choices, then
//     [DONE];
//   - a Turn with a non-2xx Status is answered with an OpenAI-style error
//     object and its Retry-After header; Body replaces whatever would be
//     written; Hang answers nothing until the client gives up or the test
//     ends;
//   - the server is closed when the test ends.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

// DefaultUsage is what a Turn without Usage reports.
var DefaultUsage = llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, Reported: true}

// Turn is one answer of the fake server.
type Turn struct {
	// Content is the assistant's text; Calls its tool calls (arguments are
	// sent verbatim, malformed or not; an empty ID becomes "call_<n>_<i>").
	Content string
	Calls   []llm.ToolCall
	// Usage is the usage reported; nil reports DefaultUsage.
	Usage *llm.Usage
	// Status is the HTTP status; 0 means 200. A non-2xx status answers an
	// error object instead of a reply.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Body, when set, is written verbatim instead of the generated body.
	Body string
	// Hang answers nothing until the request's context ends (or the test).
	Hang bool
}

// Request is one request body as the server decoded it.
type Request struct {
	Model        string
	Messages     []Message
	Tools        []Tool
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	// Header is the request's HTTP header (Authorization, Accept, …).
	Header http.Header
	// Raw is the whole body.
	Raw []byte
}

// Message is one message of a request.
type Message struct {
	Role       string
	Content    string // text; an array of text parts is joined
	ToolCalls  []llm.ToolCall
	ToolCallID string
	Name       string
}

// Tool is one function tool offered in a request.
type Tool struct {
	Type        string
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Server is a running fake endpoint.
type Server struct {
	// URL is the base URL to give a client, ending in /v1.
	URL string

	t      testing.TB
	policy func(n int, req Request) Turn
	done   chan struct{} // closed when the test ends: releases hanging turns

	mu     sync.Mutex
	reqs   []Request
	models []string
}

// SetModels sets what GET /v1/models lists (default: nothing).
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = ids
}

// serveModels answers GET /v1/models as an OpenAI-compatible server does.
func (s *Server) serveModels(w http.ResponseWriter) {
	s.mu.Lock()
	data := []map[string]any{}
	for _, id := range s.models {
		data = append(data, map[string]any{"id": id, "object": "model"})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	writeJSON(w, map[string]any{"object": "list", "data": data})
}

// NewOpenAI starts a fake Chat Completions server that answers request n
// (0-based) with policy(n, req).
func NewOpenAI(t testing.TB, policy func(n int, req Request) Turn) *Server {
	t.Helper()
	s := &Server{t: t, policy: policy, done: make(chan struct{})}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = hs.URL + "/v1"
	t.Cleanup(func() {
		close(s.done)
		hs.Close()
	})
	return s
}

// Requests returns the bodies received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Script returns a policy that plays turns in order, one per request (a 429
// turn and its retry take one each); past the end it calls finish.
func Script(turns ...Turn) func(n int, req Request) Turn {
	return func(n int, _ Request) Turn {
		if n < len(turns) {
			return turns[n]
		}
		return Turn{Calls: []llm.ToolCall{{Name: "finish", Arguments: `{"summary":"the script is over"}`}}}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		s.serveModels(w)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		s.t.Errorf("llmtest: unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("llmtest: reading request body: %v", err)
		return
	}
	req, err := decodeRequest(raw)
	if err != nil {
		s.t.Errorf("llmtest: request body is not a Chat Completions request: %v\n%s", err, raw)
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	req.Header = r.Header.Clone()
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, req)
	turn := s.policy(n, req)
	s.mu.Unlock()

	if turn.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	if turn.RetryAfter != "" {
		w.Header().Set("Retry-After", turn.RetryAfter)
	}
	status := turn.Status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case turn.Body != "":
		w.Header().Set("Content-Type", contentType(req.Stream && status < 300))
		w.WriteHeader(status)
		io.WriteString(w, turn.Body)
	case status < 200 || status > 299:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		writeJSON(w, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("fake error for request %d", n), "type": "fake_error", "code": status,
		}})
	case req.Stream:
		w.Header().Set("Content-Type", contentType(true))
		w.WriteHeader(status)
		streamTurn(w, n, req, turn)
	default:
		w.Header().Set("Content-Type", contentType(false))
		w.WriteHeader(status)
		writeJSON(w, wholeReply(n, req, turn))
	}
}

func contentType(stream bool) string {
	if stream {
		return "text/event-stream"
	}
	return "application/json"
}

// wholeReply is a non-streaming chat.completion object.
func wholeReply(n int, req Request, turn Turn) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if turn.Content != "" || len(turn.Calls) == 0 {
		msg["content"] = turn.Content
	}
	if len(turn.Calls) > 0 {
		var calls []map[string]any
		for i, c := range turn.Calls {
			calls = append(calls, map[string]any{
				"id": callID(n, i, c), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake-%d", n), "object": "chat.completion", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(turn)}},
		"usage":   usageObject(turn),
	}
}

// streamTurn writes turn as SSE chunks (see the package doc for the order).
func streamTurn(w http.ResponseWriter, n int, req Request, turn Turn) {
	base := map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", n), "object": "chat.completion.chunk", "model": req.Model}
	send := func(fields map[string]any) {
		chunk := map[string]any{}
		for k, v := range base {
			chunk[k] = v
		}
		for k, v := range fields {
			chunk[k] = v
		}
		io.WriteString(w, "data: ")
		writeJSON(w, chunk)
		io.WriteString(w, "\n")
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	delta := func(d map[string]any) {
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}})
	}
	delta(map[string]any{"role": "assistant", "content": ""})
	for _, p := range split(turn.Content, 2) {
		delta(map[string]any{"content": p})
	}
	pieces := make([][]string, len(turn.Calls))
	for i, c := range turn.Calls {
		pieces[i] = split(c.Arguments, 3)
		delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callID(n, i, c), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}})
	}
	for k := 0; k < 3; k++ {
		for i := range turn.Calls {
			if k < len(pieces[i]) {
				delta(map[string]any{"tool_calls": []any{map[string]any{
					"index": i, "function": map[string]any{"arguments": pieces[i][k]},
				}}})
			}
		}
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finishReason(turn)}}})
	if req.IncludeUsage {
		send(map[string]any{"choices": []any{}, "usage": usageObject(turn)})
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

func callID(n, i int, c llm.ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_%d_%d", n, i)
}

func finishReason(turn Turn) string {
	if len(turn.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func usageObject(turn Turn) map[string]int {
	u := DefaultUsage
	if turn.Usage != nil {
		u = *turn.Usage
	}
	return map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
}

// split cuts s into at most k non-empty pieces on rune boundaries.
func split(s string, k int) []string {
	r := []rune(s)
	var out []string
	for i := 0; i < k; i++ {
		lo, hi := len(r)*i/k, len(r)*(i+1)/k
		if hi > lo {
			out = append(out, string(r[lo:hi]))
		}
	}
	return out
}

func writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of plain values are written
	}
	w.Write(b)
	io.WriteString(w, "\n")
}

// decodeRequest reads a Chat Completions request body.
func decodeRequest(raw []byte) (Request, error) {
	var wire struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
			Name       string `json:"name"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return Request{}, err
	}
	req := Request{Model: wire.Model, Stream: wire.Stream, Raw: raw}
	req.IncludeUsage = wire.StreamOptions != nil && wire.StreamOptions.IncludeUsage
	for _, m := range wire.Messages {
		msg := Message{Role: m.Role, Content: text(m.Content), ToolCallID: m.ToolCallID, Name: m.Name}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range wire.Tools {
		req.Tools = append(req.Tools, Tool{Type: t.Type, Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req, nil
}

// text reads message content: a string, null, or an array of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
