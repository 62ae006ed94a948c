package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

// NewAnthropic starts a fake Messages API server that answers request n
// (0-based) with policy(n, req). Its URL is the bare root, like
// https://api.anthropic.com: a client appends /v1/messages.
func NewAnthropic(t testing.TB, policy func(n int, req Request) Turn) *Server {
	t.Helper()
	return newServer(t, anthropicDialect, "", policy)
}

var anthropicDialect = &dialect{
	name:      "Anthropic",
	path:      "/v1/messages",
	check:     strict.CheckAnthropic,
	decode:    decodeAnthropic,
	errorBody: anthropicTurnError,
	whole:     anthropicWhole,
	stream:    anthropicStream,
}

// anthropicTurnError is the error object of a turn with a non-2xx status,
// typed as the API types that status (n is -1 for a body that could not
// be decoded).
func anthropicTurnError(n, status int) []byte {
	typ, msg := "api_error", fmt.Sprintf("fake error for request %d", n)
	switch status {
	case http.StatusBadRequest:
		typ = "invalid_request_error"
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case 529:
		typ, msg = "overloaded_error", "Overloaded"
	}
	if n < 0 {
		msg = "bad request body"
	}
	return append(strict.AnthropicErrorBody(typ, msg), '\n')
}

// anthropicWhole writes turn as one message object.
func anthropicWhole(w io.Writer, n int, req Request, turn Turn) {
	content := []any{}
	if turn.Content != "" {
		content = append(content, map[string]any{"type": "text", "text": turn.Content})
	}
	for i, c := range turn.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": toolUseIDFor(n, i, c), "name": c.Name, "input": toolInput(c.Arguments)})
	}
	msg := anthropicMessage(n, req, turn, content)
	msg["stop_reason"] = stopReason(turn)
	msg["usage"] = map[string]int{"input_tokens": usageOf(turn).PromptTokens, "output_tokens": usageOf(turn).CompletionTokens}
	writeJSON(w, msg)
}

// anthropicStream writes turn as the API's event stream: message_start, a
// ping, each block (text first, then each tool_use) as content_block_start,
// its deltas and content_block_stop, then message_delta with the stop
// reason and output usage, then message_stop.
func anthropicStream(w io.Writer, flush func(), n int, req Request, turn Turn) {
	event := func(name string, data map[string]any) {
		data["type"] = name
		io.WriteString(w, "event: "+name+"\ndata: ")
		writeJSON(w, data)
		io.WriteString(w, "\n")
		flush()
	}
	start := anthropicMessage(n, req, turn, []any{})
	start["stop_reason"] = nil
	start["usage"] = map[string]int{"input_tokens": usageOf(turn).PromptTokens, "output_tokens": 1}
	event("message_start", map[string]any{"message": start})
	event("ping", map[string]any{})
	index := 0
	block := func(startBlock map[string]any, deltas []map[string]any) {
		event("content_block_start", map[string]any{"index": index, "content_block": startBlock})
		for _, d := range deltas {
			event("content_block_delta", map[string]any{"index": index, "delta": d})
		}
		event("content_block_stop", map[string]any{"index": index})
		index++
	}
	if turn.Content != "" {
		var deltas []map[string]any
		for _, p := range split(turn.Content, 2) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": p})
		}
		block(map[string]any{"type": "text", "text": ""}, deltas)
	}
	for i, c := range turn.Calls {
		// The API opens with an empty piece; arguments go as sent, so a
		// malformed call stays malformed.
		deltas := []map[string]any{{"type": "input_json_delta", "partial_json": ""}}
		for _, p := range split(c.Arguments, 3) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		block(map[string]any{"type": "tool_use", "id": toolUseIDFor(n, i, c), "name": c.Name, "input": map[string]any{}}, deltas)
	}
	event("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": stopReason(turn), "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": usageOf(turn).CompletionTokens},
	})
	event("message_stop", map[string]any{})
}

func anthropicMessage(n int, req Request, turn Turn, content []any) map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", n), "type": "message", "role": "assistant",
		"model": req.Model, "content": content, "stop_sequence": nil,
	}
}

func toolUseIDFor(n, i int, c llm.ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("toolu_%d_%d", n, i)
}

// toolInput is a call's arguments as a tool_use input: {} for none, the
// JSON as sent, or — as a whole message cannot hold malformed JSON — the
// text as a JSON string.
func toolInput(args string) any {
	switch {
	case strings.TrimSpace(args) == "":
		return map[string]any{}
	case json.Valid([]byte(args)):
		return json.RawMessage(args)
	}
	return args
}

func stopReason(turn Turn) string {
	if len(turn.Calls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// anContentBlock is a request content block as the fake reads it.
type anContentBlock struct {
	Kind      string          `json:"type"` // not Type: internal/record's test takes a switch on .Type for event types
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// decodeAnthropic reads a Messages API request into the neutral shape: the
// system prompt becomes a first "system" message, tool_use blocks become
// ToolCalls (arguments: the input as compact JSON), each tool_result a
// "tool" message, and the text of a user message that carries results a
// "user" message after them.
func decodeAnthropic(raw []byte) (Request, error) {
	var wire struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil && !isTypeError(err) {
		return Request{}, err
	}
	req := Request{Model: wire.Model, MaxTokens: wire.MaxTokens, Stream: wire.Stream, Raw: raw}
	if sys := blockText(wire.System, "\n\n"); sys != "" {
		req.Messages = append(req.Messages, Message{Role: "system", Content: sys})
	}
	for _, m := range wire.Messages {
		req.Messages = append(req.Messages, decodeMessage(m.Role, m.Content)...)
	}
	for _, t := range wire.Tools {
		req.Tools = append(req.Tools, Tool{Type: t.Type, Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return req, nil
}

// decodeMessage turns one wire message into neutral messages.
func decodeMessage(role string, content json.RawMessage) []Message {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []Message{{Role: role, Content: s}}
	}
	var elems []json.RawMessage
	json.Unmarshal(content, &elems)
	var out []Message
	var text strings.Builder
	results := 0
	var calls []llm.ToolCall
	for _, e := range elems {
		var b anContentBlock
		json.Unmarshal(e, &b) // a block of a shape the fake does not know is read as far as it goes
		switch b.Kind {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			calls = append(calls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: compact(b.Input)})
		case "tool_result":
			out = append(out, Message{Role: "tool", ToolCallID: b.ToolUseID, Content: blockText(b.Content, "")})
			results++
		}
	}
	if role == "assistant" {
		return []Message{{Role: role, Content: text.String(), ToolCalls: calls}}
	}
	if text.Len() > 0 || results == 0 {
		out = append(out, Message{Role: role, Content: text.String()})
	}
	return out
}

// blockText reads a string, or joins the text of an array of blocks.
func blockText(raw json.RawMessage, sep string) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Kind string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Kind == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, sep)
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
