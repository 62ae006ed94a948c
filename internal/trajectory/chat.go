package trajectory

import (
	"encoding/json"

	"github.com/apodex/apodex/internal/llm"
)

// Context is what a run's exports say beyond its record: the eval's world,
// configuration and scores, when the run is a rollout.
type Context struct {
	World  string         `json:"world,omitempty"`
	Config string         `json:"config,omitempty"`
	Scores map[string]any `json:"scores,omitempty"`
}

// ChatLine is one line of the chat export: the OpenAI fine-tuning chat
// format (messages, tools) with metadata.
type ChatLine struct {
	Messages []ChatMessage `json:"messages"`
	Tools    []ChatTool    `json:"tools,omitempty"`
	Metadata ChatMeta      `json:"metadata"`
}

// ChatMessage is one message in the fine-tuning format.
type ChatMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	ToolCalls  []ChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// ChatToolCall is an assistant's function call.
type ChatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ChatFunction `json:"function"`
}

// ChatFunction names a call and carries its arguments as JSON text.
type ChatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatTool is a function offered to the model.
type ChatTool struct {
	Type     string      `json:"type"`
	Function ChatToolDef `json:"function"`
}

// ChatToolDef is a function's name, description and JSON Schema.
type ChatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ChatMeta links a line to its run and, in a team, to its parent.
type ChatMeta struct {
	Trajectory string `json:"trajectory_id"` // RUN/AGENT
	Run        string `json:"run"`
	Agent      string `json:"agent"`
	Role       string `json:"role"`
	// Parent is the trajectory id of the agent that dispatched this one;
	// Children those this one dispatched.
	Parent   string   `json:"parent,omitempty"`
	Children []string `json:"children,omitempty"`
	Context
	Status   string `json:"status,omitempty"`
	Verified bool   `json:"verified"`
}

// Chat returns one line per agent of r, the top agent first.
func Chat(r *Run, cx Context) []ChatLine {
	var out []ChatLine
	for _, a := range r.Agents {
		line := ChatLine{Metadata: ChatMeta{
			Trajectory: r.ID + "/" + a.ID, Run: r.ID, Agent: a.ID, Role: a.Role,
			Context: cx, Status: r.Status, Verified: r.Verified,
		}}
		if a.Parent != "" {
			line.Metadata.Parent = r.ID + "/" + a.Parent
		}
		for _, c := range r.Agents {
			if c.Parent == a.ID {
				line.Metadata.Children = append(line.Metadata.Children, r.ID+"/"+c.ID)
			}
		}
		line.Messages = chatMessages(a.History)
		for _, t := range a.Tools {
			line.Tools = append(line.Tools, ChatTool{Type: "function", Function: ChatToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
		}
		out = append(out, line)
	}
	return out
}

// chatMessages converts a history; an assistant's call without a recorded
// result (a run cut off) gets no dangling id: the history ends before it.
func chatMessages(h []llm.Message) []ChatMessage {
	var out []ChatMessage
	for i := 0; i < len(h); i++ {
		m := h[i]
		cm := ChatMessage{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			answered := map[string]bool{}
			for j := i + 1; j < len(h) && h[j].Role == llm.RoleTool; j++ {
				answered[h[j].ToolCallID] = true
			}
			for _, tc := range m.ToolCalls {
				if !answered[tc.ID] {
					return out
				}
				cm.ToolCalls = append(cm.ToolCalls, ChatToolCall{ID: tc.ID, Type: "function", Function: ChatFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
		}
		out = append(out, cm)
	}
	return out
}
