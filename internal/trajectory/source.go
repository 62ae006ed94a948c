// Package trajectory reads a finished run back as its agents'
// conversations (SPEC R-DATA): every model call with the exact messages it
// was sent, grouped into context segments between compactions, each
// sub-agent linked to the call that started it; and pivot localization
// against sibling rollouts. The formats written from it (chat lines, ATIF,
// the native archive) and the export filters are in trajectory/export.
//
// Guarantees:
//   - everything is read from the run's record (through source.go, the one
//     adapter to the record) and its blobs; nothing is re-executed;
//   - a conversation's segments hold every call in record order; a call's
//     prompt is what the provider was sent, its reply what it returned.
package trajectory

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Run is what the exports need of one finished run. It is built by Load
// from the record alone; the lead may switch Load to the run-state
// projection without touching the rest of the package.
type Run struct {
	Dir       string
	ID        string
	Objective string
	Model     record.ModelSettings
	Events    []record.Event
	// Agents are the agents that took turns — the runtime's summary and
	// salvage calls are not agents — top agent first, then the others by
	// id: subagents A1…, and the agents the runtime started for the lead
	// (verifiers V1…, investigators I1…, writers W1…), each its own.
	Agents []*Agent
	// Conversations are every agent loop's calls as the model saw them
	// (what the exports write): the top agent's first, then by start.
	Conversations []*Conversation
	// Verified: the run completed and every verification recorded passed
	// (at least one was recorded).
	Verified bool
	// Checked: the record holds a verification (in any segment).
	Checked bool
	// StartedAt and FinishedAt are the times of run_started and of the
	// last run_finished (zero when none).
	StartedAt, FinishedAt time.Time
	// Delivered: the reconciled manifest was delivered whole (ok).
	Delivered   bool
	HasDelivery bool
	Status      string
	Termination string
	Usage       llm.Usage
	// Answer is the run's final summary (finish), for gold matching.
	Answer string
	Files  []record.FileEntry
}

// Agent is one agent's trajectory.
type Agent struct {
	ID     string
	Role   string // single, lead or the subagent's role
	Parent string // "" for the top agent
	// DispatchCall is the parent's tool call that dispatched this agent (or
	// that started it: a verifier's verify call).
	DispatchCall string
	History      []llm.Message
	Tools        []llm.ToolSpec
	Usage        llm.Usage
}

// Load reads the run in dir.
func Load(dir string) (*Run, error) {
	c, err := record.Read(dir)
	if err != nil {
		return nil, err
	}
	evs := c.Events
	var first any
	if len(evs) > 0 {
		if first, err = record.DecodePayload(evs[0]); err != nil && !errors.Is(err, record.ErrUnknownType) {
			return nil, err
		}
	}
	rs, ok := first.(*record.RunStarted)
	if !ok {
		return nil, fmt.Errorf("trajectory: %s: the record does not start with run_started", dir)
	}
	r := &Run{Dir: dir, ID: rs.RunID, Objective: rs.Objective, Model: rs.Model, Events: evs, StartedAt: evs[0].Time}
	turnTakers := map[string]bool{}
	toolsRef := map[string]string{}
	roles := map[string]string{}
	parents := map[string]string{}
	dispatch := map[string]string{}
	verifications, failed := 0, false
	ended := false // a run_finished came: a next segment concludes afresh
	for _, e := range evs {
		p, _ := record.DecodePayload(e) // nil when it does not decode
		switch p := p.(type) {
		case *record.Resumed:
			if ended { // the segment after a resumable end or a continue
				verifications, failed, r.HasDelivery, r.Delivered, ended = 0, false, false, false, false
			}
		case *record.ModelResponse:
			if p.Purpose == "" {
				turnTakers[e.Agent] = true
			}
		case *record.ModelRequest:
			if p.ToolsRef != "" {
				toolsRef[e.Agent] = p.ToolsRef
			}
		case *record.Assignment:
			if p.State == "created" {
				roles[p.Assignment] = p.Role
				parents[p.Assignment] = e.Agent
				dispatch[p.Assignment] = p.CallID
			}
		case *record.AgentStarted:
			roles[e.Agent], parents[e.Agent], dispatch[e.Agent] = p.Role, p.Parent, p.CallID
		case *record.Verification:
			r.Checked = true
			verifications++
			failed = failed || !p.Passed
		case *record.Delivery:
			r.HasDelivery, r.Delivered = true, p.OK
		case *record.RunFinished:
			r.FinishedAt = e.Time
			r.Status, r.Termination, r.Usage, r.Answer, r.Files = p.Status, p.Termination, p.Usage, p.Summary, p.Files
			failed = failed || len(p.Failures) > 0
			ended = true
		}
	}
	r.Verified = r.Status == "completed" && verifications > 0 && !failed
	hist, err := checkpoint.Agents(dir, evs)
	if err != nil {
		return nil, err
	}
	top := "main"
	if turnTakers["lead"] {
		top = "lead"
	}
	for id := range turnTakers {
		a := hist[id]
		if a == nil {
			continue
		}
		ag := &Agent{ID: id, History: a.History, Usage: a.Usage, Role: roles[id], Parent: parents[id], DispatchCall: dispatch[id]}
		if ag.Parent == "" && id != top {
			// An agent the runtime started for the lead (the verifier, an
			// investigator, the writer) is the lead's child too.
			ag.Parent = top
		}
		if ag.Role == "" {
			ag.Role = runtimeRole(id)
		}
		if ref := toolsRef[id]; ref != "" {
			ag.Tools, _ = readTools(dir, ref)
		}
		r.Agents = append(r.Agents, ag)
	}
	cs, err := conversations(dir, evs)
	if err != nil {
		return nil, err
	}
	r.link(cs, top, roles, parents, dispatch)
	sort.Slice(r.Agents, func(i, j int) bool {
		a, b := r.Agents[i], r.Agents[j]
		if (a.Parent == "") != (b.Parent == "") {
			return a.Parent == ""
		}
		return a.ID < b.ID
	})
	return r, nil
}

func readTools(dir, ref string) ([]llm.ToolSpec, error) {
	raw, err := record.ReadBlob(dir, ref)
	if err != nil {
		return nil, err
	}
	var specs []llm.ToolSpec
	return specs, json.Unmarshal(raw, &specs)
}

// Calls are the run's tool calls with their results, in record order.
type Call struct {
	Seq       int64
	Agent     string
	Name      string
	Arguments string
	CallID    string
	Result    *record.ToolResult
	ResultSeq int64
}

// Calls pairs every tool_call with its tool_result.
func (r *Run) Calls() []*Call {
	var out []*Call
	open := map[string]*Call{}
	for _, e := range r.Events {
		p, _ := record.DecodePayload(e) // nil when it does not decode
		switch p := p.(type) {
		case *record.ToolCall:
			tc := p
			c := &Call{Seq: e.Seq, Agent: e.Agent, Name: tc.Name, Arguments: tc.Arguments, CallID: tc.CallID}
			open[e.Agent+"\x00"+tc.CallID] = c
			out = append(out, c)
		case *record.ToolResult:
			if c := open[e.Agent+"\x00"+p.CallID]; c != nil && c.Result == nil {
				c.Result, c.ResultSeq = p, e.Seq
			}
		}
	}
	return out
}

// NormArgs is a call's arguments in a canonical form (keys sorted), so the
// same call written with other spacing compares equal.
func NormArgs(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return strings.TrimSpace(s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// runtimeRole is the role of an agent no dispatch or agent_started event
// named: the top agent, or one the runtime started in a record written
// before agent_started (verifier, investigators I1…, writer).
func runtimeRole(id string) string {
	switch {
	case id == "main":
		return llm.CallerSingle
	case record.RuntimeVerifier(id):
		return llm.CallerVerifier
	case len(id) > 1 && id[0] == 'I' && id[1] >= '0' && id[1] <= '9':
		return "investigator"
	case len(id) > 1 && id[0] == 'W' && id[1] >= '0' && id[1] <= '9':
		return "writer"
	}
	return id // lead, writer
}
