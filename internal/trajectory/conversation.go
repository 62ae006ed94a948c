package trajectory

import (
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/checkpoint"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Conversation is one agent loop's model calls, in record order, each with
// the exact messages the model was sent. A team run's verifier, started
// once per verify call, is one Conversation per call although the record
// may give every one of them the agent id "verifier".
type Conversation struct {
	// ID is the trajectory id: RUN/AGENT for an agent's first
	// conversation, RUN/AGENT.N for its Nth (N ≥ 2).
	ID    string
	Agent string // the record's agent id
	Role  string
	// Parent is the ID of the conversation that started this one ("" for
	// the top agent); StartedBy the parent's tool call that started it
	// (dispatch, verify, or the finish that ran an effort wave or the
	// writer), "" when no call is known.
	Parent, StartedBy string
	// Segments are the stretches between compactions: every call of a
	// segment sends the previous call's prompt and reply, then more.
	Segments []*Segment
	Tools    []llm.ToolSpec
	// Usage counts every call, summary calls of compaction included.
	Usage    llm.Usage
	firstSeq int64
}

// Segment is a context the model saw grow call by call. A segment after
// the first begins with a history that compaction (or a resume that
// changed it) rewrote: Continued is set and the first call's prompt is
// copied context.
type Segment struct {
	Calls     []*ModelCall
	Continued bool
}

// ModelCall is one model call: the prompt exactly as sent, the reply and
// what the record says of it.
type ModelCall struct {
	Seq        int64 // the model_response
	RequestSeq int64
	Time       time.Time // when the reply was recorded
	Prompt     []llm.Message
	// Since is, per prompt message, when it first reached the model (the
	// time of the request that first carried it).
	Since      []time.Time
	Reply      llm.Message
	Usage      llm.Usage
	Model      string
	Purpose    string
	DurationMS int64
	ResponseID string
	// Results are the recorded results of the reply's calls, by call id.
	Results map[string]*CallResult
}

// CallResult is a tool result as the agent was shown it.
type CallResult struct {
	Seq  int64
	Time time.Time
	record.ToolResult
}

// Last is the segment's last call: its prompt and reply are the segment's
// whole context.
func (s *Segment) Last() *ModelCall { return s.Calls[len(s.Calls)-1] }

// ReplyAt reports which call of s produced the message at index i of the
// last call's context (prompt then reply), or nil when that message is not
// a reply of this segment (copied context, or not an assistant turn).
func (s *Segment) ReplyAt(i int) *ModelCall {
	for _, c := range s.Calls {
		if len(c.Prompt) == i {
			return c
		}
	}
	return nil
}

// conv is a Conversation being rebuilt.
type conv struct {
	c       *Conversation
	hist    []llm.Message
	since   []time.Time
	pending int64 // the seq of the request awaiting its reply (0: none)
	tools   string
	last    *ModelCall
	marked  bool // a compaction or a resume since its last request
}

// conversations rebuilds every conversation of the record: each request's
// prompt is the history up to its From plus its messages, so after a
// compaction (From 0, the whole rewritten history) the prompt is what was
// sent, stubs and summary included.
func conversations(dir string, evs []record.Event) ([]*conv, error) {
	var all []*conv
	byResp := map[int64]*conv{}
	byReq := map[int64]*conv{}
	byAgent := map[string][]*conv{}
	for _, e := range evs {
		p, err := record.DecodePayload(e)
		if errors.Is(err, record.ErrUnknownType) {
			continue // written by a newer apodex: no part of a conversation this version knows
		} else if err != nil {
			return nil, err
		}
		switch p := p.(type) {
		case *record.Resumed:
			for _, cs := range byAgent {
				for _, c := range cs {
					c.marked = true
				}
			}
		case *record.Compaction:
			for _, c := range byAgent[e.Agent] {
				c.marked = true
			}
		case *record.ModelRequest:
			mr := *p
			msgs := make([]llm.Message, 0, len(mr.Messages))
			for _, raw := range mr.Messages {
				m, err := checkpoint.DecodeMessage(dir, raw)
				if err != nil {
					return nil, fmt.Errorf("trajectory: %s request at seq %d: %w", e.Agent, e.Seq, err)
				}
				msgs = append(msgs, m)
			}
			c := requestConv(byResp, byAgent[e.Agent], mr, msgs)
			if c == nil {
				c = &conv{c: &Conversation{Agent: e.Agent, firstSeq: e.Seq}}
				all = append(all, c)
				byAgent[e.Agent] = append(byAgent[e.Agent], c)
			}
			// Earlier calls' prompts share hist's array: it is only ever
			// appended to in place; a rewrite (From before its end) copies.
			from := min(mr.From, len(c.hist))
			if from < len(c.hist) {
				c.hist, c.since = c.hist[:from:from], c.since[:from:from]
			}
			c.hist = append(c.hist, msgs...)
			for range msgs {
				c.since = append(c.since, e.Time)
			}
			c.pending, c.marked = e.Seq, false
			if mr.ToolsRef != "" {
				c.tools = mr.ToolsRef
			}
			byReq[e.Seq] = c
		case *record.ModelResponse:
			mr := p
			if mr.Purpose == record.PurposeSummary {
				if cs := byAgent[e.Agent]; len(cs) > 0 {
					c := cs[len(cs)-1]
					c.c.Usage = c.c.Usage.Add(mr.Usage)
				}
				continue
			}
			c := byReq[mr.Request]
			if c == nil || mr.Request == 0 {
				c = nil
				for _, x := range byAgent[e.Agent] { // a record without request links: the oldest waiting
					if x.pending != 0 {
						c = x
						break
					}
				}
			}
			if c == nil {
				continue // a reply to no recorded request
			}
			reply, err := checkpoint.DecodeMessage(dir, mr.Message)
			if err != nil {
				return nil, fmt.Errorf("trajectory: %s reply at seq %d: %w", e.Agent, e.Seq, err)
			}
			reply.Role = llm.RoleAssistant
			call := &ModelCall{Seq: e.Seq, RequestSeq: c.pending, Time: e.Time, Prompt: c.hist[:len(c.hist):len(c.hist)], Since: c.since[:len(c.since):len(c.since)],
				Reply: reply, Usage: mr.Usage, Model: mr.Model, Purpose: mr.Purpose, DurationMS: mr.DurationMS, ResponseID: mr.ResponseID,
				Results: map[string]*CallResult{}}
			cv := c.c
			if c.last != nil && extends(call.Prompt, c.last) {
				seg := cv.Segments[len(cv.Segments)-1]
				seg.Calls = append(seg.Calls, call)
			} else {
				cv.Segments = append(cv.Segments, &Segment{Calls: []*ModelCall{call}, Continued: c.last != nil})
			}
			cv.Usage = cv.Usage.Add(mr.Usage)
			c.hist = append(c.hist, reply)
			c.since = append(c.since, e.Time)
			c.last, c.pending = call, 0
			byResp[e.Seq] = c
		case *record.ToolResult:
			tr := *p
			cs := byAgent[e.Agent]
			for i := len(cs) - 1; i >= 0; i-- {
				if l := cs[i].last; l != nil && l.Results[tr.CallID] == nil && hasCall(l.Reply, tr.CallID) {
					l.Results[tr.CallID] = &CallResult{Seq: e.Seq, Time: e.Time, ToolResult: tr}
					break
				}
			}
		}
	}
	for _, c := range all {
		if c.tools != "" {
			c.c.Tools, _ = readTools(dir, c.tools)
		}
	}
	return all, nil
}

// requestConv is the conversation a request continues, or nil for a new
// one: the loop's previous reply (follows) says which; a record without
// that link is matched by agent id (a request with From > 0 continues the
// agent's waiting conversation; one with From 0 starts a new one unless a
// compaction or resume came first and the head is the same).
func requestConv(byResp map[int64]*conv, cs []*conv, mr record.ModelRequest, msgs []llm.Message) *conv {
	if mr.Follows != 0 {
		return byResp[mr.Follows]
	}
	for _, c := range cs {
		switch {
		case mr.From > 0 && c.pending == 0 && len(c.hist) >= mr.From:
			return c
		case mr.From == 0 && c.marked && sameHead(c.hist, msgs):
			return c
		}
	}
	return nil
}

// sameHead: the system prompt and the task are the same.
func sameHead(a, b []llm.Message) bool {
	n := min(2, len(a), len(b))
	if n == 0 {
		return false
	}
	for i := range n {
		if !sameMessage(a[i], b[i]) {
			return false
		}
	}
	return true
}

// extends reports whether prompt starts with the previous call's prompt
// and reply: the model saw the context grow, nothing in it rewritten.
func extends(prompt []llm.Message, prev *ModelCall) bool {
	if len(prompt) < len(prev.Prompt)+1 {
		return false
	}
	for i, m := range prev.Prompt {
		if !sameMessage(prompt[i], m) {
			return false
		}
	}
	return sameMessage(prompt[len(prev.Prompt)], prev.Reply)
}

// sameMessage compares what a provider is sent of a message.
func sameMessage(a, b llm.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID &&
		slices.Equal(a.ToolCalls, b.ToolCalls)
}

func hasCall(m llm.Message, id string) bool {
	for _, tc := range m.ToolCalls {
		if tc.ID == id {
			return true
		}
	}
	return false
}

// claimOf is the claim a verifier's prompt begins with ("Claim:\n…").
func claimOf(c *Conversation) string {
	if len(c.Segments) == 0 {
		return ""
	}
	for _, m := range c.Segments[0].Calls[0].Prompt {
		if m.Role == llm.RoleUser {
			rest, ok := strings.CutPrefix(m.Content, "Claim:\n")
			if !ok {
				return ""
			}
			claim, _, _ := strings.Cut(rest, "\n\nEvidence:")
			return claim
		}
	}
	return ""
}
