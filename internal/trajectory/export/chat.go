package export

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/trajectory"
)

// Context is what a run's exports say beyond its record: the eval's world,
// configuration and scores, when the run is a rollout.
type Context struct {
	World  string         `json:"world,omitempty"`
	Config string         `json:"config,omitempty"`
	Scores map[string]any `json:"scores,omitempty"`
}

// Chat flavours and argument forms.
const (
	FlavorOpenAI = "openai" // OpenAI's fine-tuning file: arguments as JSON text
	FlavorHF     = "hf"     // Hugging Face chat templates and TRL: arguments as an object
	ArgsObject   = "object"
	ArgsString   = "string"
)

// Turn masks: assistant turns given weight 0.
const (
	MaskCopied      = "copied"       // turns of copied context (before a compaction): always
	MaskFailed      = "failed"       // a turn one of whose calls returned an error
	MaskInvalidTool = "invalid-tool" // a turn that called an unknown tool or gave arguments that are not an object
)

// ChatOptions say how chat lines are written. The zero value is the
// OpenAI flavour with arguments as JSON text, copied context masked.
type ChatOptions struct {
	Flavor    string
	Arguments string // "" : object for hf, string for openai
	// Mask are the turn masks beyond copied context.
	Mask map[string]bool
	// InlineMetadata puts each line's metadata under "metadata" (a key the
	// OpenAI format does not define); otherwise Chat returns it apart.
	InlineMetadata bool
}

func (o ChatOptions) objectArgs() bool {
	if o.Arguments != "" {
		return o.Arguments == ArgsObject
	}
	return o.Flavor == FlavorHF
}

// ChatLine is one training sample: one context segment of one agent loop,
// the model's actual context up to its last reply in that segment.
type ChatLine struct {
	Messages []ChatMessage `json:"messages"`
	Tools    []ChatTool    `json:"tools,omitempty"`
	Metadata *ChatMeta     `json:"metadata,omitempty"`
}

// ChatMessage is one message. Weight is set on assistant turns: 1 for a
// reply the model made in this context, 0 for copied context and turns a
// mask marks.
type ChatMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	Name             string         `json:"name,omitempty"`
	Weight           *int           `json:"weight,omitempty"`
}

// ChatToolCall is an assistant's function call.
type ChatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ChatFunction `json:"function"`
}

// ChatFunction names a call; Arguments is a JSON string holding the JSON
// (openai) or the object itself (hf).
type ChatFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
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

// ChatMeta links a line to its run, its agent and the lines around it.
type ChatMeta struct {
	Sample     string `json:"sample"`        // TRAJECTORY#SEGMENT
	Trajectory string `json:"trajectory_id"` // RUN/AGENT[.N]
	Segment    int    `json:"segment"`       // 1, 2, … (a compaction starts the next)
	Run        string `json:"run"`
	Agent      string `json:"agent"`
	Role       string `json:"role"`
	// Parent is the trajectory that started this one, StartedBy its call;
	// Children those this one started.
	Parent    string   `json:"parent,omitempty"`
	StartedBy string   `json:"started_by,omitempty"`
	Children  []string `json:"children,omitempty"`
	Context
	Status   string `json:"status,omitempty"`
	Verified bool   `json:"verified"`
}

// Chat returns one line per context segment of every conversation, the
// top agent's first, with each line's metadata (also inline when asked).
func Chat(r *trajectory.Run, cx Context, o ChatOptions) ([]ChatLine, []ChatMeta) {
	var lines []ChatLine
	var metas []ChatMeta
	for _, c := range r.Conversations {
		var children []string
		for _, d := range r.Conversations {
			if d.Parent == c.ID {
				children = append(children, d.ID)
			}
		}
		var tools []ChatTool
		for _, t := range c.Tools {
			tools = append(tools, ChatTool{Type: "function", Function: ChatToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
		}
		for i, seg := range c.Segments {
			meta := ChatMeta{Sample: fmt.Sprintf("%s#%d", c.ID, i+1), Trajectory: c.ID, Segment: i + 1, Run: r.ID, Agent: c.Agent, Role: c.Role,
				Parent: c.Parent, StartedBy: c.StartedBy, Children: children, Context: cx, Status: r.Status, Verified: r.Verified}
			line := ChatLine{Messages: segmentMessages(seg, o, offered(c)), Tools: tools}
			if o.InlineMetadata {
				m := meta
				line.Metadata = &m
			}
			lines, metas = append(lines, line), append(metas, meta)
		}
	}
	return lines, metas
}

// segmentMessages is the segment's context: its last call's prompt and
// reply, each assistant turn weighted.
func segmentMessages(seg *trajectory.Segment, o ChatOptions, offered map[string]bool) []ChatMessage {
	last := seg.Last()
	msgs := append(append([]llm.Message(nil), last.Prompt...), last.Reply)
	out := make([]ChatMessage, 0, len(msgs))
	for i, m := range msgs {
		cm := ChatMessage{Role: string(m.Role), ToolCallID: m.ToolCallID}
		content := m.Content
		cm.Content = &content
		switch m.Role {
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				cm.ToolCalls = append(cm.ToolCalls, ChatToolCall{ID: tc.ID, Type: "function", Function: ChatFunction{Name: tc.Name, Arguments: chatArgs(tc.Arguments, o.objectArgs())}})
			}
			if o.Flavor == FlavorHF {
				cm.ReasoningContent = m.Reasoning
			} else if content == "" && len(cm.ToolCalls) > 0 {
				cm.Content = nil // OpenAI: content may be absent beside tool_calls
			}
			w := 0
			if call := seg.ReplyAt(i); call != nil && !masked(call, o.Mask, offered) {
				w = 1
			}
			cm.Weight = &w
		case llm.RoleTool:
			if o.Flavor == FlavorHF {
				cm.Name = m.Name
			}
		}
		out = append(out, cm)
	}
	return out
}

// masked reports whether a mask marks the turn call made.
func masked(call *trajectory.ModelCall, mask map[string]bool, offered map[string]bool) bool {
	for _, tc := range call.Reply.ToolCalls {
		if r := call.Results[tc.ID]; mask[MaskFailed] && r != nil && r.IsError {
			return true
		}
		if mask[MaskInvalidTool] {
			var obj map[string]any
			if (offered != nil && !offered[tc.Name]) || (strings.TrimSpace(tc.Arguments) != "" && json.Unmarshal([]byte(tc.Arguments), &obj) != nil) {
				return true
			}
		}
	}
	return false
}

// chatArgs renders arguments as the OpenAI client sent them (empty: {};
// not JSON: {"_raw": text}), as a JSON string or as the object itself
// (arguments that are not an object become {"_raw": text}).
func chatArgs(args string, object bool) json.RawMessage {
	text := args
	switch {
	case strings.TrimSpace(args) == "":
		text = "{}"
	case !json.Valid([]byte(args)):
		raw, _ := json.Marshal(map[string]string{"_raw": args})
		text = string(raw)
	}
	if object {
		return argsObject(text)
	}
	raw, _ := json.Marshal(text)
	return raw
}

// offered is the set of tools conversation c was offered (nil: unknown).
func offered(c *trajectory.Conversation) map[string]bool {
	if len(c.Tools) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, t := range c.Tools {
		m[t.Name] = true
	}
	return m
}
