package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

// NewOpenAI starts a fake Chat Completions server that answers request n
// (0-based) with policy(n, req). Its URL ends in /v1.
func NewOpenAI(t testing.TB, policy func(n int, req Request) Turn) *Server {
	t.Helper()
	return newServer(t, openAIDialect, "/v1", policy)
}

var openAIDialect = &dialect{
	name:      "OpenAI",
	path:      "/v1/chat/completions",
	check:     strict.CheckOpenAI,
	decode:    decodeOpenAI,
	errorBody: openAIErrorBody,
	whole: func(w io.Writer, n int, req Request, turn Turn) {
		writeJSON(w, wholeReply(n, req, turn))
	},
	stream: streamTurn,
	other: func(s *Server, w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			return false
		}
		s.serveModels(w)
		return true
	},
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

// openAIErrorBody is the error object of a turn with a non-2xx status
// (n is -1 for a body that could not be decoded).
func openAIErrorBody(n, status int) []byte {
	msg := fmt.Sprintf("fake error for request %d", n)
	if n < 0 {
		msg = "bad request body"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "fake_error", "code": status}})
	return append(b, '\n')
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
func streamTurn(w io.Writer, flush func(), n int, req Request, turn Turn) {
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
		flush()
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

// usageObject is the turn's usage as OpenAI reports it: cached and
// reasoning tokens, when set, in their details objects.
func usageObject(turn Turn) map[string]any {
	u := usageOf(turn)
	out := map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
	if u.CachedTokens > 0 {
		out["prompt_tokens_details"] = map[string]int{"cached_tokens": u.CachedTokens}
	}
	if u.ReasoningTokens > 0 {
		out["completion_tokens_details"] = map[string]int{"reasoning_tokens": u.ReasoningTokens}
	}
	return out
}

// decodeOpenAI reads a Chat Completions request body; a field of the wrong
// type is left empty.
func decodeOpenAI(raw []byte) (Request, error) {
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
		MaxTokens     int  `json:"max_tokens"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil && !isTypeError(err) {
		return Request{}, err
	}
	req := Request{Model: wire.Model, Stream: wire.Stream, MaxTokens: wire.MaxTokens, Raw: raw}
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
