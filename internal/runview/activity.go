package runview

import (
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// AgentActivity is what one agent did in a run, read from the record: the
// data behind a per-agent timeline.
type AgentActivity struct {
	Agent string `json:"agent"` // "main", "lead", "A1", …
	// Role, Item, State and Reason come from a subagent's assignment events;
	// Role and Parent of an agent the runtime started (a verifier V1, an
	// investigator I1, the writer W1) from its agent_started event.
	Role   string `json:"role,omitempty"`
	Parent string `json:"parent,omitempty"`
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

// assignmentsOf is the projection's assignments, in order of creation.
func assignmentsOf(st *runstate.State) []AssignmentInfo {
	var out []AssignmentInfo
	for _, a := range st.Assignments {
		out = append(out, AssignmentInfo{ID: a.Assignment.Assignment, Item: a.Item, Role: a.Role, Tools: a.Tools,
			State: a.State, Reason: a.Reason, Lifecycle: a.Lifecycle})
	}
	return out
}

// activityOf is one entry per agent that ran a loop or was assigned, in
// order of first appearance.
func activityOf(st *runstate.State) []AgentActivity {
	out := []AgentActivity{}
	for _, a := range st.Agents {
		out = append(out, AgentActivity{Agent: a.ID, Role: a.Role, Parent: a.Parent, Item: a.Item, State: a.State, Reason: a.Reason,
			Queued: a.Queued, From: a.From, To: a.To, ActiveMS: a.To.Sub(a.From).Milliseconds(), Turns: a.Turns,
			ToolCalls: a.ToolCalls, ToolErrors: a.ToolErrors, ModelErrors: a.ModelErrors, Tokens: a.Usage.TotalTokens})
	}
	return out
}

// AssignmentsOf is the run's assignments, in order of creation.
func AssignmentsOf(st *runstate.State) []AssignmentInfo { return assignmentsOf(st) }

// The functions below read a slice of events through the projection (for
// callers that hold the events already).

// Activity is activityOf the events.
func Activity(events []record.Event) []AgentActivity { return activityOf(fold(events)) }

// Assignments is AssignmentsOf the events.
func Assignments(events []record.Event) []AssignmentInfo { return assignmentsOf(fold(events)) }

// BoardOf is the task board the events fold to; found is false when they
// hold no board event; err is the first board event the board refused.
func BoardOf(events []record.Event) (b *board.Board, found bool, err error) {
	st := fold(events)
	if st.BoardErr != nil {
		err = st.BoardErr
	}
	return st.Board, st.BoardEvents > 0, err
}

// ModeOf says how the run was started: ModeTeam or ModeReact, "" before
// run_started.
func ModeOf(events []record.Event) string { return fold(events).Mode() }

// fold is the projection of the events up to the first it refuses.
func fold(events []record.Event) *runstate.State {
	st := runstate.New()
	for _, e := range events {
		if st.Apply(e) != nil {
			break
		}
	}
	return st
}
