package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/apodex/apodex/internal/llm"
)

// wireResponse is a non-streamed reply, and the message of message_start.
type wireResponse struct {
	ID         string         `json:"id"`
	Model      string         `json:"model"`
	Content    []wireContent  `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      *wireUsage     `json:"usage"`
	Error      *wireErrorBody `json:"error"`
}

// wireContent is one reply content block: text, tool_use, and the
// thinking and redacted_thinking blocks of extended thinking.
type wireContent struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// wireUsage fields are pointers so a message_delta that omits one does not
// overwrite what message_start said.
type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

type wireErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// usage accumulates reported token counts.
type usage struct {
	input, output, cacheCreate, cacheRead int
	reported                              bool
}

// merge takes every count u reports; stream counts are cumulative.
func (a *usage) merge(u *wireUsage) {
	if u == nil {
		return
	}
	a.reported = true
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set(&a.input, u.InputTokens)
	set(&a.output, u.OutputTokens)
	set(&a.cacheCreate, u.CacheCreationInputTokens)
	set(&a.cacheRead, u.CacheReadInputTokens)
}

func (a usage) llm() llm.Usage {
	if !a.reported {
		return llm.Usage{}
	}
	// Prompt tokens are all input, as OpenAI counts them; the cache's
	// share is said apart.
	prompt := a.input + a.cacheCreate + a.cacheRead
	return llm.Usage{
		PromptTokens:        prompt,
		CompletionTokens:    a.output,
		TotalTokens:         prompt + a.output,
		CachedTokens:        a.cacheRead,
		CacheCreationTokens: a.cacheCreate,
		Reported:            true,
	}
}

// block is one finished content block, streamed or not; input is the raw
// tool_use input text; text is a thinking block's thinking too.
type block struct {
	typ, text, id, name, input, signature, data string
}

// decodeMessage reads a non-streamed reply from endpoint url.
func decodeMessage(r io.Reader, url string) (*llm.Response, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("anthropic: read response: %w: %w", llm.ErrTruncated, err)
	}
	var w wireResponse
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("anthropic: decode response: %w: %v", llm.ErrMalformed, err)
	}
	if w.Error != nil {
		return nil, replyError(url, w.Error)
	}
	blocks := make([]block, 0, len(w.Content))
	for _, c := range w.Content {
		text := c.Text
		if c.Type == "thinking" {
			text = c.Thinking
		}
		blocks = append(blocks, block{typ: c.Type, text: text, id: c.ID, name: c.Name, input: string(c.Input), signature: c.Signature, data: c.Data})
	}
	var u usage
	u.merge(w.Usage)
	return assemble(w.ID, w.Model, w.StopReason, blocks, u)
}

// assemble builds the response from blocks in index order. Thinking
// blocks are kept whole (Thinking, to send back) and their text joined as
// the turn's Reasoning.
func assemble(id, model, stop string, blocks []block, u usage) (*llm.Response, error) {
	msg := llm.Message{Role: llm.RoleAssistant}
	var text, reasoning strings.Builder
	for _, b := range blocks {
		switch b.typ {
		case "text":
			text.WriteString(b.text)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: b.id, Name: b.name, Arguments: arguments(b.input)})
		case "thinking":
			if reasoning.Len() > 0 && b.text != "" {
				reasoning.WriteString("\n\n")
			}
			reasoning.WriteString(b.text)
			msg.Thinking = append(msg.Thinking, llm.Thinking{Type: b.typ, Text: b.text, Signature: b.signature})
		case "redacted_thinking":
			msg.Thinking = append(msg.Thinking, llm.Thinking{Type: b.typ, Data: b.data})
		}
	}
	msg.Content, msg.Reasoning = text.String(), reasoning.String()
	if msg.Content == "" && len(msg.ToolCalls) == 0 && stop == "" {
		return nil, fmt.Errorf("anthropic: reply has no content and no stop reason: %w", llm.ErrEmpty)
	}
	return &llm.Response{Message: msg, Usage: u.llm(), FinishReason: finishReason(stop), Model: model, ID: id}, nil
}

// arguments renders a tool_use input as compact JSON. No input means no
// arguments; input that does not parse (a cut stream) is kept as sent.
func arguments(input string) string {
	trimmed := strings.TrimSpace(input)
	if trimmed == "" || trimmed == "null" {
		return "{}"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(trimmed)) != nil {
		return input
	}
	return buf.String()
}

// replyError is an error the server reported after answering 2xx.
func replyError(url string, e *wireErrorBody) *llm.APIError {
	msg := e.Message
	if e.Type != "" {
		msg = e.Type + ": " + msg
	}
	return (&llm.APIError{StatusCode: errorStatus(e.Type), URL: url, Message: cut(msg, maxErrorMessage), Code: e.Type}).Classify("")
}

func finishReason(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	default: // pause_turn, refusal, ...: passed through
		return stop
	}
}
