package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/trajectory"
)

// ATIF versions written; Harbor's models default to 1.8, which adds audio
// content parts to 1.7 and changes nothing an Apodex trajectory holds.
const (
	ATIFv17     = "ATIF-v1.7"
	ATIFv18     = "ATIF-v1.8"
	ATIFVersion = ATIFv18
)

// ATIF is one trajectory document of Harbor's Agent Trajectory
// Interchange Format. Each context segment of an agent loop is its own
// document: a compaction ends one (continued_trajectory_ref names the
// next) and the next begins with the rewritten context, its steps marked
// is_copied_context. An agent another one started is embedded in the
// document whose step started it, and referenced from that step's
// observation by trajectory_id.
type ATIF struct {
	SchemaVersion          string         `json:"schema_version"`
	SessionID              string         `json:"session_id,omitempty"`
	TrajectoryID           string         `json:"trajectory_id"`
	Agent                  ATIFAgent      `json:"agent"`
	Steps                  []ATIFStep     `json:"steps"`
	Notes                  string         `json:"notes,omitempty"`
	FinalMetrics           *ATIFFinal     `json:"final_metrics,omitempty"`
	ContinuedTrajectoryRef string         `json:"continued_trajectory_ref,omitempty"`
	Extra                  map[string]any `json:"extra,omitempty"`
	SubagentTrajectories   []ATIF         `json:"subagent_trajectories,omitempty"`
}

// ATIFAgent describes the agent and the tools it was offered.
type ATIFAgent struct {
	Name            string           `json:"name"`
	Version         string           `json:"version"`
	ModelName       string           `json:"model_name,omitempty"`
	ToolDefinitions []map[string]any `json:"tool_definitions,omitempty"`
	Extra           map[string]any   `json:"extra,omitempty"`
}

// ATIFStep is one step: a system or user message, or an agent turn with its
// tool calls, their observation and the call's metrics.
type ATIFStep struct {
	StepID           int              `json:"step_id"`
	Timestamp        string           `json:"timestamp,omitempty"`
	Source           string           `json:"source"`
	ModelName        string           `json:"model_name,omitempty"`
	Message          string           `json:"message"`
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	ToolCalls        []ATIFToolCall   `json:"tool_calls,omitempty"`
	Observation      *ATIFObservation `json:"observation,omitempty"`
	Metrics          *ATIFMetrics     `json:"metrics,omitempty"`
	IsCopiedContext  bool             `json:"is_copied_context,omitempty"`
	LLMCallCount     *int             `json:"llm_call_count,omitempty"`
	Extra            map[string]any   `json:"extra,omitempty"`
}

// ATIFToolCall is one call; arguments are an object.
type ATIFToolCall struct {
	ToolCallID   string          `json:"tool_call_id"`
	FunctionName string          `json:"function_name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// ATIFObservation holds the results of a step's calls.
type ATIFObservation struct {
	Results []ATIFResult `json:"results"`
}

// ATIFResult is one call's result.
type ATIFResult struct {
	SourceCallID          string       `json:"source_call_id,omitempty"`
	Content               string       `json:"content"`
	SubagentTrajectoryRef []ATIFSubRef `json:"subagent_trajectory_ref,omitempty"`
}

// ATIFSubRef points at an embedded trajectory.
type ATIFSubRef struct {
	TrajectoryID string         `json:"trajectory_id"`
	SessionID    string         `json:"session_id,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

// ATIFMetrics are one model call's tokens: prompt tokens are all input,
// cached tokens the part of them read from the provider's cache.
type ATIFMetrics struct {
	PromptTokens     int            `json:"prompt_tokens"`
	CompletionTokens int            `json:"completion_tokens"`
	CachedTokens     int            `json:"cached_tokens"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// ATIFFinal are the document's totals over its own (not copied) calls.
type ATIFFinal struct {
	TotalPromptTokens     int            `json:"total_prompt_tokens"`
	TotalCompletionTokens int            `json:"total_completion_tokens"`
	TotalCachedTokens     int            `json:"total_cached_tokens"`
	TotalSteps            int            `json:"total_steps"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// ATIFDoc is one document to write: the root trajectory, or a segment of
// its chain that continues it (File names it beside the root).
type ATIFDoc struct {
	File string
	ATIF
}

// ContinuationFile is the file of the root chain's nth continuation.
func ContinuationFile(n int) string { return fmt.Sprintf("trajectory.cont-%d.json", n) }

// ToATIF builds the run's documents: the top agent's first segment (with
// every agent it started embedded), then its continuations, each for its
// own file.
func ToATIF(r *trajectory.Run, cx Context, version, schema string) []ATIFDoc {
	if schema == "" {
		schema = ATIFVersion
	}
	b := atifBuilder{r: r, version: version, schema: schema}
	var top *trajectory.Conversation
	if len(r.Conversations) > 0 && r.Conversations[0].Parent == "" {
		top = r.Conversations[0]
	}
	if top == nil || len(top.Segments) == 0 {
		return []ATIFDoc{{File: "trajectory.json", ATIF: ATIF{SchemaVersion: schema, SessionID: r.ID, TrajectoryID: r.ID, Agent: ATIFAgent{Name: "apodex", Version: version},
			Steps: []ATIFStep{{StepID: 1, Source: "user", Message: r.Objective}}, Extra: map[string]any{"run": r.ID, "status": r.Status}}}}
	}
	docs := b.conversation(top, true)
	out := make([]ATIFDoc, len(docs))
	for i, d := range docs {
		out[i] = ATIFDoc{File: "trajectory.json", ATIF: d}
		if i > 0 {
			out[i].File = ContinuationFile(i)
		}
	}
	out[0].Extra = map[string]any{"run": r.ID, "status": r.Status, "verified": r.Verified, "agent": top.Agent, "role": top.Role}
	if cx.World != "" || cx.Config != "" || cx.Scores != nil {
		out[0].Extra["eval"] = cx
	}
	return out
}

type atifBuilder struct {
	r               *trajectory.Run
	version, schema string
}

// segmentID is the trajectory id of a conversation's segment i (0-based).
func segmentID(c *trajectory.Conversation, i int) string {
	if i == 0 {
		return c.ID
	}
	return fmt.Sprintf("%s#cont-%d", c.ID, i)
}

// conversation is one document per segment of c, chained; a root chain
// refers to its files, an embedded one to trajectory ids.
func (b atifBuilder) conversation(c *trajectory.Conversation, root bool) []ATIF {
	var children []*trajectory.Conversation
	for _, d := range b.r.Conversations {
		if d.Parent == c.ID {
			children = append(children, d)
		}
	}
	placed := map[*trajectory.Conversation]bool{}
	docs := make([]ATIF, len(c.Segments))
	for i, seg := range c.Segments {
		docs[i] = b.segment(c, i, seg, children, placed)
		if i+1 < len(c.Segments) {
			docs[i].ContinuedTrajectoryRef = segmentID(c, i+1)
			if root {
				docs[i].ContinuedTrajectoryRef = ContinuationFile(i + 1)
			}
		}
	}
	for _, d := range children { // started by no step found: embedded, unreferenced
		if !placed[d] {
			docs[0].SubagentTrajectories = append(docs[0].SubagentTrajectories, b.conversation(d, false)...)
		}
	}
	return docs
}

// segment is the document of c's segment i.
func (b atifBuilder) segment(c *trajectory.Conversation, i int, seg *trajectory.Segment, children []*trajectory.Conversation, placed map[*trajectory.Conversation]bool) ATIF {
	r := b.r
	t := ATIF{SchemaVersion: b.schema, SessionID: r.ID, TrajectoryID: segmentID(c, i),
		Agent: ATIFAgent{Name: "apodex", Version: b.version, ModelName: r.Model.Name,
			Extra: map[string]any{"agent": c.Agent, "role": c.Role, "segment": i + 1}}}
	if c.Parent != "" {
		t.Agent.Extra["parent"] = c.Parent
	}
	if c.StartedBy != "" {
		t.Agent.Extra["started_by"] = c.StartedBy
	}
	for _, spec := range c.Tools {
		var params any
		if json.Unmarshal(spec.Parameters, &params) != nil {
			params = map[string]any{}
		}
		t.Agent.ToolDefinitions = append(t.Agent.ToolDefinitions, map[string]any{"type": "function",
			"function": map[string]any{"name": spec.Name, "description": spec.Description, "parameters": params}})
	}
	last := seg.Last()
	ctx := append(append([]llm.Message(nil), last.Prompt...), last.Reply)
	since := append(append([]time.Time(nil), last.Since...), last.Time)
	fin := &ATIFFinal{}
	one := 1
	for j := 0; j < len(ctx); j++ {
		m := ctx[j]
		st := ATIFStep{StepID: len(t.Steps) + 1, Message: m.Content, Timestamp: stamp(since[j])}
		call := seg.ReplyAt(j)
		copied := seg.Continued && j < len(seg.Calls[0].Prompt)
		switch m.Role {
		case llm.RoleSystem:
			st.Source = "system"
		case llm.RoleUser:
			st.Source = "user"
		case llm.RoleAssistant:
			st.Source = "agent"
			for _, tc := range m.ToolCalls {
				st.ToolCalls = append(st.ToolCalls, ATIFToolCall{ToolCallID: tc.ID, FunctionName: tc.Name, Arguments: argsObject(chatText(tc.Arguments))})
			}
			results := map[string]string{}
			var order []string
			for j+1 < len(ctx) && ctx[j+1].Role == llm.RoleTool {
				j++
				results[ctx[j].ToolCallID] = ctx[j].Content
				order = append(order, ctx[j].ToolCallID)
			}
			if len(order) == 0 && call != nil {
				for _, tc := range m.ToolCalls {
					if res := call.Results[tc.ID]; res != nil {
						results[tc.ID] = res.Output
						order = append(order, tc.ID)
					}
				}
			}
			obs := &ATIFObservation{}
			for _, id := range order {
				res := ATIFResult{SourceCallID: id, Content: results[id]}
				if !slices.ContainsFunc(m.ToolCalls, func(tc llm.ToolCall) bool { return tc.ID == id }) {
					res.SourceCallID = "" // a result the turn did not ask for: kept, unlinked
				}
				for _, d := range children {
					if d.StartedBy == id && call != nil && !placed[d] {
						placed[d] = true
						res.SubagentTrajectoryRef = append(res.SubagentTrajectoryRef, ATIFSubRef{TrajectoryID: d.ID, Extra: map[string]any{"role": d.Role, "agent": d.Agent}})
						t.SubagentTrajectories = append(t.SubagentTrajectories, b.conversation(d, false)...)
					}
				}
				obs.Results = append(obs.Results, res)
			}
			if len(obs.Results) > 0 {
				st.Observation = obs
			}
			if call != nil {
				st.ModelName = call.Model
				if st.ModelName == "" {
					st.ModelName = r.Model.Name
				}
				st.ReasoningContent = m.Reasoning
				st.Timestamp = stamp(call.Time)
				st.LLMCallCount = &one
				st.Metrics = callMetrics(call)
				fin.TotalPromptTokens += call.Usage.PromptTokens
				fin.TotalCompletionTokens += call.Usage.CompletionTokens
				fin.TotalCachedTokens += call.Usage.CachedTokens
				if call.Purpose != "" {
					st.Extra = map[string]any{"purpose": call.Purpose}
				}
			}
		default: // a tool message without its call: its words as a system step
			st.Source = "system"
		}
		st.IsCopiedContext = copied && call == nil
		t.Steps = append(t.Steps, st)
	}
	fin.TotalSteps = len(t.Steps)
	t.FinalMetrics = fin
	return t
}

// callMetrics are a call's metrics; estimates are said to be.
func callMetrics(c *trajectory.ModelCall) *ATIFMetrics {
	u := c.Usage
	m := &ATIFMetrics{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens, Extra: map[string]any{"duration_ms": c.DurationMS}}
	if u.CacheCreationTokens > 0 {
		m.Extra["cache_creation_tokens"] = u.CacheCreationTokens
	}
	if u.ReasoningTokens > 0 {
		m.Extra["reasoning_tokens"] = u.ReasoningTokens
	}
	if !u.Reported {
		m.Extra["reported"] = false
	}
	if c.ResponseID != "" {
		m.Extra["response_id"] = c.ResponseID
	}
	return m
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// chatText is arguments as the clients send them: empty means {}.
func chatText(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	return args
}

// argsObject is a call's arguments as the object ATIF wants, compacted,
// keys and numbers as sent; arguments that are not a JSON object are kept
// under "_raw".
func argsObject(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(t)) == nil {
			return buf.Bytes()
		}
	}
	raw, _ := json.Marshal(map[string]string{"_raw": s})
	return raw
}
