package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/llm"
)

// wireRequest is the body of POST /v1/messages.
type wireRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      string        `json:"system,omitempty"`
	Messages    []wireMessage `json:"messages"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	ToolChoice  *toolChoice   `json:"tool_choice,omitempty"`
	Stream      bool          `json:"stream,omitempty"`
}

// toolChoice is {"type": "auto" | "any" | "tool" | "none"}.
type toolChoice struct {
	Type string `json:"type"`
}

// wireMessage holds content blocks: textBlock, toolUseBlock, toolResultBlock.
type wireMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type textBlock struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// thinkingBlock is a thinking or redacted_thinking block sent back as it
// came: with extended thinking on, the API requires the last assistant
// turn's blocks, signature included, before its tool_use blocks.
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

type toolResultBlock struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// encodeRequest renders req as the JSON body.
func (c *Client) encodeRequest(req *llm.Request) ([]byte, error) {
	model := c.model(req)
	if model == "" {
		return nil, errors.New("anthropic: no model set (pass --model, e.g. claude-sonnet-4-5)")
	}
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = c.cfg.MaxOutputTokens
	}
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	tools, err := mapTools(req.Tools)
	if err != nil {
		return nil, err
	}
	system, msgs := mapMessages(req.Messages)
	w := wireRequest{
		Model:       model,
		MaxTokens:   maxTokens,
		System:      system,
		Messages:    msgs,
		Tools:       tools,
		Temperature: req.Temperature,
		Stream:      c.cfg.Stream,
	}
	if req.ToolChoice != "" && len(tools) > 0 {
		w.ToolChoice = &toolChoice{Type: req.ToolChoice}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep tool arguments byte-for-byte readable
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("anthropic: encode request: %w", err)
	}
	return buf.Bytes(), nil
}

// mapMessages splits out the system text and converts the rest to the
// API's strictly alternating user/assistant messages: the history is first
// repaired (llm.Repair), consecutive messages of one role become one message
// (a turn's tool results first, then any text), empty and whitespace-only
// text is left out, and a conversation that would not start with a user
// message gets a short one first.
func mapMessages(in []llm.Message) (string, []wireMessage) {
	var system []string
	var out []wireMessage
	add := func(role string, blocks ...any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	text := func(s string) []any {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return []any{textBlock{Type: "text", Text: s}}
	}
	for _, m := range llm.Repair(in) {
		switch m.Role {
		case llm.RoleSystem:
			if m.Content != "" {
				system = append(system, m.Content)
			}
		case llm.RoleTool:
			content := m.Content
			if strings.TrimSpace(content) == "" {
				content = "(no output)"
			}
			add("user", toolResultBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content, IsError: m.IsError})
		case llm.RoleAssistant:
			var blocks []any
			for _, th := range m.Thinking {
				if th.Signature != "" || th.Data != "" { // unsigned thinking is refused
					blocks = append(blocks, thinkingBlock{Type: th.Type, Thinking: th.Text, Signature: th.Signature, Data: th.Data})
				}
			}
			blocks = append(blocks, text(m.Content)...)
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
			add("assistant", blocks...)
		default: // user, and any role the API has no place for
			add("user", text(m.Content)...)
		}
	}
	if out == nil {
		out = []wireMessage{} // "messages" must be an array, never null
	} else if out[0].Role != "user" {
		out = append([]wireMessage{{Role: "user", Content: []any{textBlock{Type: "text", Text: "(the conversation so far follows)"}}}}, out...)
	}
	return strings.Join(system, "\n\n"), out
}

// toolInput turns tool-call arguments into the object the API requires.
// Empty arguments mean no arguments; anything that is not a JSON object is
// wrapped as {"_raw": text} so the model still sees what it wrote.
func toolInput(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage("{}")
	}
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(trimmed)) == nil {
			return buf.Bytes()
		}
	}
	raw, _ := json.Marshal(map[string]string{"_raw": args}) // cannot fail for a string map
	return raw
}

// mapTools converts tool specs; a spec without a schema gets the empty
// object schema, since input_schema is required.
func mapTools(in []llm.ToolSpec) ([]wireTool, error) {
	var out []wireTool
	for _, t := range in {
		schema := bytes.TrimSpace(t.Parameters)
		switch {
		case len(schema) == 0 || string(schema) == "null":
			schema = []byte(`{"type":"object"}`)
		case !json.Valid(schema):
			return nil, fmt.Errorf("anthropic: tool %q: parameters are not valid JSON", t.Name)
		}
		out = append(out, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}
