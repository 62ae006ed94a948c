package trajectory

import (
	"encoding/json"

	"github.com/apodex/apodex/internal/llm"
)

// ATIFVersion is the Agent Trajectory Interchange Format version written.
const ATIFVersion = "ATIF-v1.7"

// ATIF is one trajectory of Harbor's Agent Trajectory Interchange Format
// v1.7. A team run's subagents are embedded in SubagentTrajectories and
// referenced, by trajectory_id, from the observation of the dispatch call
// that started them (the spec's embedded form).
type ATIF struct {
	SchemaVersion        string         `json:"schema_version"`
	SessionID            string         `json:"session_id,omitempty"`
	TrajectoryID         string         `json:"trajectory_id"`
	Agent                ATIFAgent      `json:"agent"`
	Steps                []ATIFStep     `json:"steps"`
	Notes                string         `json:"notes,omitempty"`
	FinalMetrics         *ATIFFinal     `json:"final_metrics,omitempty"`
	Extra                map[string]any `json:"extra,omitempty"`
	SubagentTrajectories []ATIF         `json:"subagent_trajectories,omitempty"`
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
// tool calls and their observation.
type ATIFStep struct {
	StepID      int              `json:"step_id"`
	Source      string           `json:"source"`
	ModelName   string           `json:"model_name,omitempty"`
	Message     string           `json:"message"`
	ToolCalls   []ATIFToolCall   `json:"tool_calls,omitempty"`
	Observation *ATIFObservation `json:"observation,omitempty"`
}

// ATIFToolCall is one call; arguments are an object.
type ATIFToolCall struct {
	ToolCallID   string         `json:"tool_call_id"`
	FunctionName string         `json:"function_name"`
	Arguments    map[string]any `json:"arguments"`
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

// ATIFSubRef points at an embedded subagent trajectory.
type ATIFSubRef struct {
	TrajectoryID string `json:"trajectory_id"`
	SessionID    string `json:"session_id,omitempty"`
}

// ATIFFinal are the trajectory's totals.
type ATIFFinal struct {
	TotalPromptTokens     int `json:"total_prompt_tokens"`
	TotalCompletionTokens int `json:"total_completion_tokens"`
	TotalSteps            int `json:"total_steps"`
}

// ToATIF builds the run's trajectory: its top agent, subagents embedded.
func ToATIF(r *Run, cx Context, version string) ATIF {
	var top *Agent
	for _, a := range r.Agents {
		if a.Parent == "" {
			top = a
			break
		}
	}
	if top == nil {
		return ATIF{SchemaVersion: ATIFVersion, SessionID: r.ID, TrajectoryID: r.ID, Agent: ATIFAgent{Name: "apodex", Version: version}, Steps: []ATIFStep{{StepID: 1, Source: "user", Message: r.Objective}}}
	}
	t := agentATIF(r, top, version)
	t.Extra = map[string]any{"run": r.ID, "status": r.Status, "verified": r.Verified}
	if cx.World != "" || cx.Config != "" || cx.Scores != nil {
		t.Extra["eval"] = cx
	}
	return t
}

func agentATIF(r *Run, a *Agent, version string) ATIF {
	t := ATIF{SchemaVersion: ATIFVersion, SessionID: r.ID, TrajectoryID: r.ID + "/" + a.ID,
		Agent: ATIFAgent{Name: "apodex", Version: version, ModelName: r.Model.Name, Extra: map[string]any{"agent": a.ID, "role": a.Role}}}
	for _, spec := range a.Tools {
		var params any
		if json.Unmarshal(spec.Parameters, &params) != nil {
			params = map[string]any{}
		}
		t.Agent.ToolDefinitions = append(t.Agent.ToolDefinitions, map[string]any{"type": "function",
			"function": map[string]any{"name": spec.Name, "description": spec.Description, "parameters": params}})
	}
	subs := map[string]*Agent{} // dispatch call id -> subagent
	for _, c := range r.Agents {
		if c.Parent == a.ID && c.DispatchCall != "" {
			subs[c.DispatchCall] = c
		}
	}
	h := a.History
	for i := 0; i < len(h); i++ {
		m := h[i]
		st := ATIFStep{StepID: len(t.Steps) + 1, Message: m.Content}
		switch m.Role {
		case llm.RoleSystem:
			st.Source = "system"
		case llm.RoleUser:
			st.Source = "user"
		case llm.RoleAssistant:
			st.Source, st.ModelName = "agent", r.Model.Name
			for _, tc := range m.ToolCalls {
				st.ToolCalls = append(st.ToolCalls, ATIFToolCall{ToolCallID: tc.ID, FunctionName: tc.Name, Arguments: argsObject(tc.Arguments)})
			}
			obs := &ATIFObservation{}
			for i+1 < len(h) && h[i+1].Role == llm.RoleTool {
				i++
				res := ATIFResult{SourceCallID: h[i].ToolCallID, Content: h[i].Content}
				if sub := subs[h[i].ToolCallID]; sub != nil {
					res.SubagentTrajectoryRef = []ATIFSubRef{{TrajectoryID: r.ID + "/" + sub.ID, SessionID: r.ID}}
				}
				obs.Results = append(obs.Results, res)
			}
			if len(obs.Results) > 0 {
				st.Observation = obs
			}
		default: // a tool message without its call: keep its words as a system step
			st.Source = "system"
		}
		t.Steps = append(t.Steps, st)
	}
	t.FinalMetrics = &ATIFFinal{TotalPromptTokens: a.Usage.PromptTokens, TotalCompletionTokens: a.Usage.CompletionTokens, TotalSteps: len(t.Steps)}
	for _, c := range r.Agents {
		if c.Parent == a.ID {
			t.SubagentTrajectories = append(t.SubagentTrajectories, agentATIF(r, c, version))
		}
	}
	return t
}

// argsObject is a call's arguments as the object ATIF wants; arguments
// that are not a JSON object are kept under "_raw".
func argsObject(s string) map[string]any {
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) == nil && m != nil {
		return m
	}
	return map[string]any{"_raw": s}
}
