// Package checkpoint rebuilds, from a run's record, what each agent had at
// the last step boundary the record holds: its model-visible history, its
// counters, and the step that was in flight when the process stopped.
//
// Guarantees:
//   - the history is exactly what the agent's next model request would have
//     carried: the messages of its last model_request (which holds the whole
//     history after a compaction), its last reply, then the results of that
//     reply's tool calls in call order, then the runtime observations and
//     user messages recorded after it, in record order;
//   - a tool call with no recorded result is reported as interrupted — it
//     may or may not have taken effect — and never silently re-run;
//   - a model call with no recorded reply is simply made again: the history
//     stops at its request;
//   - large message bodies come back from their blobs; a missing blob is an
//     error, not a silent hole.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Interrupted is the observation an agent reads for a call cut off by the
// stop of the process.
const Interrupted = llm.InterruptedMarker + " (the process was killed or crashed) while this call was running, and has been resumed. The call may or may not have taken effect: check the state (list_files, read_file) before doing it again."

// Agent is one agent's state at the last step boundary.
type Agent struct {
	ID        string
	History   []llm.Message
	Turns     int
	ToolCalls int
	Usage     llm.Usage
	// Interrupted are the calls of the last reply whose results were never
	// recorded; their results in History say so.
	Interrupted []llm.ToolCall
	// AwaitingModel: the last model call got no reply; it will be made
	// again.
	AwaitingModel bool
	// Finished holds the summary of an accepted finish (or report): the
	// agent's work ended although its loop's end was not recorded.
	// FinishArgs are that call's arguments (a report's claims…).
	Finished   *string
	FinishArgs string
}

// stored is a message as the agent loop records it.
type stored struct {
	llm.Message
	ContentRef string `json:"content_ref,omitempty"`
}

// Agents rebuilds every agent that made a model call, keyed by agent id.
func Agents(dir string, events []record.Event) (map[string]*Agent, error) {
	agents := map[string]*Agent{}
	type pendingResult struct {
		output  string
		isError bool
	}
	results := map[string]map[string]pendingResult{} // agent -> call id -> result after its last reply
	lastReply := map[string]*llm.Message{}
	tail := map[string][]llm.Message{} // observations and user messages after the last reply or request
	get := func(id string) *Agent {
		a, ok := agents[id]
		if !ok {
			a = &Agent{ID: id}
			agents[id] = a
		}
		return a
	}
	effects := map[string]string{} // agent and call id -> what the call did, from the effects it recorded
	for _, e := range events {
		p, err := record.DecodePayload(e)
		if errors.Is(err, record.ErrUnknownType) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch mr := p.(type) {
		case *record.Board, *record.Assignment:
			if call, text := effectOf(p); call != "" && text != "" {
				effects[e.Agent+"\x00"+call] = text // call ids are unique per agent only
			}
		case *record.ModelRequest:
			a := get(e.Agent)
			if mr.From > len(a.History) {
				return nil, fmt.Errorf("checkpoint: %s request at seq %d starts at message %d, only %d known", e.Agent, e.Seq, mr.From, len(a.History))
			}
			h := a.History[:mr.From:mr.From]
			for _, raw := range mr.Messages {
				m, err := DecodeMessage(dir, raw)
				if err != nil {
					return nil, fmt.Errorf("checkpoint: %s request at seq %d: %w", e.Agent, e.Seq, err)
				}
				h = append(h, m)
			}
			a.History, a.AwaitingModel = h, true
			lastReply[e.Agent], tail[e.Agent] = nil, nil
		case *record.ModelResponse:
			switch mr.Purpose {
			case record.PurposeVerify: // not an agent's conversation
				continue
			case record.PurposeSummary: // counted, never part of the history
				a := get(e.Agent)
				a.Usage = a.Usage.Add(mr.Usage)
				continue
			}
			m, err := DecodeMessage(dir, mr.Message)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: %s reply at seq %d: %w", e.Agent, e.Seq, err)
			}
			a := get(e.Agent)
			a.Turns++
			a.Usage = a.Usage.Add(mr.Usage)
			if a.Turns == 1 {
				a.Usage.Reported = mr.Usage.Reported
			}
			a.History = append(a.History, m)
			a.AwaitingModel = false
			lastReply[e.Agent], tail[e.Agent] = &a.History[len(a.History)-1], nil
			results[e.Agent] = map[string]pendingResult{}
		case *record.ToolCall:
			get(e.Agent).ToolCalls++
		case *record.ToolResult:
			tr := mr
			if r, ok := results[e.Agent]; ok {
				r[tr.CallID] = pendingResult{tr.Output, tr.IsError}
			}
			if (tr.Name == "finish" || tr.Name == "report") && !tr.IsError {
				var args struct{ Summary string }
				raw := ""
				if reply := lastReply[e.Agent]; reply != nil {
					for _, c := range reply.ToolCalls {
						if c.ID == tr.CallID {
							json.Unmarshal([]byte(c.Arguments), &args)
							raw = c.Arguments
						}
					}
				}
				a := get(e.Agent)
				a.Finished, a.FinishArgs = &args.Summary, raw
			}
		case *record.TextFinish: // a tool-free answer taken as finish
			if mr.Accepted {
				a := get(e.Agent)
				a.Finished = &mr.Summary
			}
		case *record.Observation:
			if o := mr; o.Kind != "finalize" {
				m := llm.Message{Role: llm.RoleUser, Content: "[runtime observation] " + o.Text, Protected: o.Kind == "assignments"}
				tail[e.Agent] = append(tail[e.Agent], m)
			}
		case *record.Message:
			if um := mr; um.To != "" && um.Control == "" && um.Answer == "" {
				tail[um.To] = append(tail[um.To], llm.Message{Role: llm.RoleUser, Content: UserMessage(um.ID, um.Class, um.Text)})
			}
		}
	}
	for id, a := range agents {
		if reply := lastReply[id]; reply != nil && !a.AwaitingModel {
			for _, c := range reply.ToolCalls {
				r, ok := results[id][c.ID]
				if !ok {
					if text, done := effects[id+"\x00"+c.ID]; done {
						// Its effect is on record: the call completed, only
						// its result was lost; retrying would do it twice.
						r = pendingResult{text + " (completed before the run stopped; its full result was not recorded)", false}
					} else {
						a.Interrupted = append(a.Interrupted, c)
						r = pendingResult{Interrupted, true}
					}
				}
				a.History = append(a.History, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: r.output, IsError: r.isError, Protected: c.Name == "wait"})
			}
		}
		a.History = append(a.History, tail[id]...)
	}
	return agents, nil
}

// UserMessage is how a user message reads in an agent's history; the run's
// delivery and the rebuild share it so a resumed history is the same text.
func UserMessage(id, class, text string) string {
	return fmt.Sprintf("[user message %s · %s]\n%s", id, class, text)
}

// DecodeMessage reads a message as the agent loop records it (in a
// model_request or model_response), its body from a blob when the loop moved
// it to one.
func DecodeMessage(dir string, raw json.RawMessage) (llm.Message, error) {
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return llm.Message{}, err
	}
	if s.ContentRef != "" {
		b, err := record.ReadBlob(dir, s.ContentRef)
		if err != nil {
			return llm.Message{}, fmt.Errorf("message body %s: %w", s.ContentRef, err)
		}
		s.Message.Content = string(b)
	}
	return s.Message, nil
}

// Stopped summarizes, for the record's resumed event, what was in flight.
func Stopped(agents map[string]*Agent) map[string][]string {
	out := map[string][]string{}
	for id, a := range agents {
		var calls []string
		for _, c := range a.Interrupted {
			calls = append(calls, c.Name+" "+c.ID)
		}
		if a.AwaitingModel {
			calls = append(calls, "model call")
		}
		if len(calls) > 0 {
			out[id] = calls
		}
	}
	return out
}

// effectOf reads the call that caused a coordination event, and what the
// call's result said, as far as the event tells.
func effectOf(p any) (call, text string) {
	switch p := p.(type) {
	case *record.Assignment:
		if p.CallID != "" && p.State == "created" {
			return p.CallID, fmt.Sprintf("dispatched %s on %s; call wait to collect its report", p.Assignment, p.Item)
		}
	case *record.Board:
		if p.CallID == "" {
			break
		}
		switch p.Op {
		case "add":
			return p.CallID, "added " + p.ID
		case "update":
			return p.CallID, "updated " + p.ID
		case "resolve":
			return p.CallID, "resolved " + p.ID
		case "cancel":
			return p.CallID, "cancelled " + p.ID
		case "reopen":
			return p.CallID, "reopened " + p.ID
		}
	}
	return "", ""
}
