package otel

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"

	"github.com/apodex/apodex/internal/llm"
)

// Message content in the shape the GenAI conventions give
// gen_ai.input.messages, gen_ai.output.messages and
// gen_ai.system_instructions: messages of role and parts (text,
// reasoning, tool_call, tool_call_response), as JSON strings.
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  *string         `json:"response,omitempty"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

func parts(m llm.Message) []part {
	var out []part
	if m.Role == llm.RoleTool {
		c := m.Content
		return []part{{Type: "tool_call_response", ID: m.ToolCallID, Response: &c}}
	}
	if m.Reasoning != "" {
		out = append(out, part{Type: "reasoning", Content: m.Reasoning})
	}
	if m.Content != "" {
		out = append(out, part{Type: "text", Content: m.Content})
	}
	for _, tc := range m.ToolCalls {
		args := json.RawMessage(tc.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(tc.Arguments)
		}
		out = append(out, part{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: args})
	}
	if out == nil {
		out = []part{}
	}
	return out
}

// inputAttrs are a prompt's system instructions and input messages.
func inputAttrs(prompt []llm.Message) []attribute.KeyValue {
	var sys []part
	msgs := []message{}
	for _, m := range prompt {
		if m.Role == llm.RoleSystem {
			sys = append(sys, part{Type: "text", Content: m.Content})
			continue
		}
		msgs = append(msgs, message{Role: string(m.Role), Parts: parts(m)})
	}
	in, _ := json.Marshal(msgs)
	attrs := []attribute.KeyValue{attribute.String(inputMsgs, string(in))}
	if sys != nil {
		raw, _ := json.Marshal(sys)
		attrs = append(attrs, attribute.String(systemInstr, string(raw)))
	}
	return attrs
}

// outputJSON is a reply as gen_ai.output.messages.
func outputJSON(reply llm.Message, finish string) string {
	raw, _ := json.Marshal([]message{{Role: "assistant", Parts: parts(reply), FinishReason: finish}})
	return string(raw)
}
