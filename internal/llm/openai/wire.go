package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
)

// Outbound wire types: the Chat Completions request body.

type wireRequest struct {
	Model         string         `json:"model,omitempty"`
	Messages      []wireMessage  `json:"messages"`
	Tools         []wireTool     `json:"tools,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	ToolChoice    string         `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is always sent, "" included: an empty assistant content goes
	// back as "" (some servers reject null, and "" is what they sent).
	Content    string         `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string      `json:"type"`
	Function wireToolDef `json:"function"`
}

type wireToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// emptySchema is sent for tools without parameters; several servers reject a
// missing or null schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func buildRequest(req *llm.Request, model string, stream bool) wireRequest {
	if req.Model != "" {
		model = req.Model
	}
	w := wireRequest{
		Model:       model,
		Messages:    make([]wireMessage, 0, len(req.Messages)),
		MaxTokens:   max(req.MaxOutputTokens, 0),
		Temperature: req.Temperature,
	}
	if stream {
		w.Stream = true
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	for _, m := range llm.Repair(req.Messages) {
		w.Messages = append(w.Messages, buildMessage(m))
	}
	if req.ToolChoice != "" && len(req.Tools) > 0 {
		w.ToolChoice = req.ToolChoice
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
			params = emptySchema
		}
		w.Tools = append(w.Tools, wireTool{
			Type:     "function",
			Function: wireToolDef{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	return w
}

func buildMessage(m llm.Message) wireMessage {
	content := m.Content
	w := wireMessage{Role: string(m.Role), Content: content}
	switch m.Role {
	case llm.RoleAssistant:
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			switch {
			case strings.TrimSpace(args) == "":
				args = "{}" // servers that parse history choke on ""
			case !json.Valid([]byte(args)):
				// Servers that render history through a chat template (vLLM)
				// parse past arguments; a malformed call the loop already
				// reported must not fail every later request.
				raw, _ := json.Marshal(map[string]string{"_raw": args})
				args = string(raw)
			}
			w.ToolCalls = append(w.ToolCalls, wireToolCall{
				ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args},
			})
		}
	case llm.RoleTool:
		// Name stays off tool messages: the schema has no such field and strict
		// servers reject unknown ones.
		w.ToolCallID = m.ToolCallID
	default:
		w.Name = m.Name
	}
	return w
}

// Inbound wire types, shared by whole replies and stream chunks.

type chatResponse struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type wireChoice struct {
	Index        int        `json:"index"`
	Message      *inMessage `json:"message"`
	Delta        *inMessage `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type inMessage struct {
	Content   flexText     `json:"content"`
	Refusal   flexText     `json:"refusal"`
	ToolCalls []inToolCall `json:"tool_calls"`
	// ReasoningContent (vLLM, llama.cpp, DeepSeek) and Reasoning
	// (OpenRouter, Ollama, newer vLLM) carry the model's reasoning; a
	// server sends one of them.
	ReasoningContent flexText `json:"reasoning_content"`
	Reasoning        flexText `json:"reasoning"`
}

// reasoning is the message's reasoning text, whichever field carried it.
func (m *inMessage) reasoning() string {
	if m.ReasoningContent != "" {
		return string(m.ReasoningContent)
	}
	return string(m.Reasoning)
}

type inToolCall struct {
	// Index is set in stream deltas only.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string  `json:"name"`
		Arguments argText `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *wireUsage) toLLM() llm.Usage {
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	out := llm.Usage{
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		TotalTokens:      total,
		Reported:         true,
	}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = d.CachedTokens // a part of prompt_tokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

// argText is tool-call arguments: normally a JSON string holding JSON, but some
// servers send the object itself. Either way the raw text is kept.
type argText string

func (a *argText) UnmarshalJSON(data []byte) error {
	var s string
	switch {
	case string(data) == "null":
		*a = ""
	case len(data) > 0 && data[0] == '"' && json.Unmarshal(data, &s) == nil:
		*a = argText(s)
	default:
		*a = argText(data)
	}
	return nil
}

// flexText is message content: a string, null, or an array of text parts.
type flexText string

func (f *flexText) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*f = flexText(s)
		return nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(data, &parts) != nil {
		*f = "" // null, or a shape we do not know: no text
		return nil
	}
	var b strings.Builder
	for _, p := range parts {
		var part struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(p, &s) == nil {
			b.WriteString(s)
		} else if json.Unmarshal(p, &part) == nil {
			b.WriteString(part.Text)
		}
	}
	*f = flexText(b.String())
	return nil
}

// present reports whether a raw JSON field was sent with a non-null value.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// normalizeFinish maps provider spellings onto "stop", "tool_calls", "length".
func normalizeFinish(s string) string {
	switch s {
	case "function_call":
		return "tool_calls"
	case "max_tokens":
		return "length"
	case "eos", "eos_token", "end_turn", "stop_sequence":
		return "stop"
	}
	return s
}

// errorObject reads a provider error: {"message","type","code"} or a bare string.
// status is the HTTP status the reply came with; a numeric code or a server
// error type overrides it so retry decisions see the real class of failure.
func errorObject(raw json.RawMessage, status int) (msg string, code int) {
	code = status
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, code
	}
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return string(raw), code
	}
	msg = obj.Message
	if msg == "" {
		msg = string(raw)
	}
	if n := numericCode(obj.Code); n >= 400 && n <= 599 {
		return msg, n
	}
	if obj.Type == "server_error" && code < 500 {
		code = 500
	}
	return msg, code
}

// numericCode reads a code sent as a number or a numeric string; 0 otherwise.
func numericCode(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		n, _ = strconv.Atoi(s)
	}
	return n
}

// errorMessage extracts the provider's message from an error body, else the
// body itself.
func errorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var s string
		switch {
		case present(e.Error):
			msg, _ := errorObject(e.Error, 0)
			return msg
		case e.Message != "":
			return e.Message
		case json.Unmarshal(e.Detail, &s) == nil && s != "":
			return s
		}
	}
	return string(bytes.TrimSpace(body))
}

// errorCode is the error's "code" when it is a string, else its "type"
// ("context_length_exceeded", llama.cpp's "exceed_context_size_error").
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code json.RawMessage `json:"code"`
			Type string          `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	var code string
	if json.Unmarshal(e.Error.Code, &code) == nil && code != "" {
		return code
	}
	return e.Error.Type
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i > n-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// snippet is a short quoted excerpt of a reply for malformed-response errors.
func snippet(b []byte) string {
	return fmt.Sprintf("%q", cut(string(b), 200))
}
