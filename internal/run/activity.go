package run

import (
	"fmt"
	"slices"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/team"
)

// AgentActivity is what one agent did in a run, read from the record: the
// data behind a per-agent timeline.
type AgentActivity struct {
	Agent string `json:"agent"` // "main", "lead", "A1", …
	// Role, Item, State and Reason come from a subagent's assignment events.
	Role   string `json:"role,omitempty"`
	Item   string `json:"item,omitempty"`
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Queued is when a subagent was queued (zero for the lead or main agent).
	Queued time.Time `json:"queued,omitzero"`
	// From and To are the agent's first and last event, not counting its
	// creation and queueing: the span it was active.
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	ActiveMS    int64     `json:"active_ms"`
	Turns       int       `json:"turns"` // model responses
	ToolCalls   int       `json:"tool_calls"`
	ToolErrors  int       `json:"tool_errors"`
	ModelErrors int       `json:"model_errors,omitempty"`
	Tokens      int       `json:"tokens"`
}

// AssignmentInfo is one assignment's lifecycle as recorded.
type AssignmentInfo struct {
	ID        string   `json:"id"`
	Item      string   `json:"item"`
	Role      string   `json:"role,omitempty"`
	Tools     []string `json:"tools,omitempty"`
	State     string   `json:"state"`
	Reason    string   `json:"reason,omitempty"` // of the last state change that gave one
	Lifecycle []string `json:"lifecycle"`        // every state in order: created, queued, …
}

// assignmentEvent is the payload of team's assignment events.
type assignmentEvent struct {
	Assignment string   `json:"assignment"`
	Item       string   `json:"item"`
	Role       string   `json:"role"`
	Tools      []string `json:"tools"`
	State      string   `json:"state"`
	Reason     string   `json:"reason"`
}

// Assignments folds the record's assignment events, in order of creation.
// Events that do not decode are skipped.
func Assignments(events []record.Event) []AssignmentInfo {
	var out []AssignmentInfo
	index := map[string]int{}
	for _, e := range events {
		var ae assignmentEvent
		if e.Type != record.TypeAssignment || e.Decode(&ae) != nil || ae.Assignment == "" {
			continue
		}
		i, ok := index[ae.Assignment]
		if !ok {
			i = len(out)
			index[ae.Assignment] = i
			out = append(out, AssignmentInfo{ID: ae.Assignment, Lifecycle: []string{}})
		}
		a := &out[i]
		if ae.Item != "" {
			a.Item = ae.Item
		}
		if ae.Role != "" {
			a.Role = ae.Role
		}
		if ae.Tools != nil {
			a.Tools = ae.Tools
		}
		if ae.State != "" {
			a.State = ae.State
			a.Lifecycle = append(a.Lifecycle, ae.State)
		}
		if ae.Reason != "" {
			a.Reason = ae.Reason
		}
	}
	return out
}

// Activity returns one entry per agent that ran a loop (made a model call
// or a tool call) or was assigned, in order of first appearance. The
// run-level events (agent ""), the runtime's and the verifier's verdicts
// are not agents' activity.
func Activity(events []record.Event) []AgentActivity {
	assigned := map[string]AssignmentInfo{}
	for _, a := range Assignments(events) {
		assigned[a.ID] = a
	}
	isAgent := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case record.TypeModelRequest, record.TypeModelResponse, record.TypeModelError, record.TypeToolCall:
			isAgent[e.Agent] = e.Agent != ""
		}
	}
	for id := range assigned {
		isAgent[id] = true
	}
	var out []AgentActivity
	index := map[string]int{}
	get := func(id string) *AgentActivity {
		i, ok := index[id]
		if !ok {
			i = len(out)
			index[id] = i
			a := assigned[id]
			out = append(out, AgentActivity{Agent: id, Role: a.Role, Item: a.Item, State: a.State, Reason: a.Reason})
		}
		return &out[i]
	}
	for _, e := range events {
		id := e.Agent
		if e.Type == record.TypeAssignment {
			// The creation is recorded by the lead; it belongs to the subagent.
			var ae assignmentEvent
			if e.Decode(&ae) != nil || !isAgent[ae.Assignment] {
				continue
			}
			id = ae.Assignment
			a := get(id)
			switch ae.State {
			case team.Created:
				continue
			case team.Queued:
				a.Queued = e.Time
				continue
			}
		}
		if !isAgent[id] {
			continue
		}
		a := get(id)
		if a.From.IsZero() {
			a.From = e.Time
		}
		a.To = e.Time
		switch e.Type {
		case record.TypeModelResponse:
			var mr record.ModelResponse
			if e.Decode(&mr) == nil {
				a.Turns++
				a.Tokens += mr.Usage.TotalTokens
			}
		case record.TypeModelError:
			a.ModelErrors++
		case record.TypeToolCall:
			a.ToolCalls++
		case record.TypeToolResult:
			var tr record.ToolResult
			if e.Decode(&tr) == nil && tr.IsError {
				a.ToolErrors++
			}
		}
	}
	for i := range out {
		out[i].ActiveMS = out[i].To.Sub(out[i].From).Milliseconds()
	}
	return out
}

// BoardOf folds the record's board events into the task board. found is
// false when the record has none (a react run, or a lead that has not
// planned yet). On an event that does not decode or that the board refuses,
// it returns the board up to that event with the error.
func BoardOf(events []record.Event) (b *board.Board, found bool, err error) {
	b = &board.Board{}
	for _, e := range events {
		if e.Type != record.TypeBoard {
			continue
		}
		found = true
		var be board.Event
		if err := e.Decode(&be); err != nil {
			return b, true, err
		}
		if err := b.Apply(b.Seq()+1, be); err != nil {
			return b, true, fmt.Errorf("board event at record seq %d (%s %s): %w", e.Seq, be.Op, be.ID, err)
		}
	}
	return b, found, nil
}

// ModeOf says how the run was started: ModeTeam when the first agent was
// given the lead's tools, ModeReact otherwise, "" before run_started.
func ModeOf(events []record.Event) string {
	for _, e := range events {
		if e.Type != record.TypeRunStarted {
			continue
		}
		var rs record.RunStarted
		if e.Decode(&rs) == nil && slices.Contains(rs.Tools, "dispatch") {
			return ModeTeam
		}
		return ModeReact
	}
	return ""
}
