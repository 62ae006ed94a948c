package replay

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// An agent id usually names one agent loop: its turns are handed out in
// the order recorded. But the runtime starts agents of its own (verifiers,
// investigators, the writer), and a record may hold several loops under
// one id (every verifier of an older record is "verifier"), some of them
// at once. Each such loop is a conversation: the replay hands out
// conversations in their recorded order, the one whose opening (the task
// it was given) matches first, and then keeps a live loop on its
// conversation by the reply it was last handed. Whatever ids the record
// uses (verifier, V1, I2, W1) are taken as they are.
//
// What the record cannot say: when two loops of one id asked for their
// first turns before either was answered, which reply answered which
// request; they are paired in the order recorded, except for verifiers,
// whose loops end in a verdict the runtime records with the claim it
// judged: a verifier's loop is paired with the opening of that claim
// (pairVerdicts).

// conversation is one agent loop's turns as recorded.
type conversation struct {
	agent   string
	opening string // the last user message of its first request
	// asked and answered are the seqs of its first request and reply: two
	// loops whose spans overlap ran at once, and the record does not say
	// which opening got which reply.
	asked, answered int64
	turns           []recordedTurn
	next            int          // turns handed out
	bound           bool         // a live loop plays it
	last            *llm.Message // the reply last handed out
}

// convBuilder splits an agent's recorded turns into conversations.
type convBuilder struct {
	m        *replayModel
	byAgent  map[string][]*conversation
	open     map[string][]opening        // agent -> first requests not yet answered
	linked   map[string][]*conversation  // agent -> the conversation a later request continues (nil: unknown)
	byCall   map[[2]string]*conversation // (agent, tool call id) -> conversation
	verdicts []verdictEvent
}

// opening is a first request of a loop.
type opening struct {
	seq  int64
	text string
}

// verdictEvent is a recorded verdict: the claim judged and what the
// verifier's verdict call said.
type verdictEvent struct {
	agent, claim string
	call         verdictCall
}

// verdictCall is the arguments of a verifier's verdict call, as the
// verdict event repeats them.
type verdictCall struct {
	Verdict  string   `json:"verdict"`
	Location string   `json:"location"`
	Repair   string   `json:"repair"`
	Reason   string   `json:"reason"`
	Checks   []string `json:"checks"`
}

// verdict notes a verdict event.
func (b *convBuilder) verdict(agent string, v *record.Verdict) {
	call := verdictCall{Verdict: v.Verdict, Location: v.Location, Repair: v.Repair, Reason: v.Reason, Checks: v.Checks}
	b.verdicts = append(b.verdicts, verdictEvent{agent: agent, claim: v.Claim, call: call})
}

// pairVerdicts gives each loop of an id that several loops shared at once,
// and that ended in a verdict call, the opening of the claim its verdict
// was recorded for (a verifier's task begins "Claim:\n<claim>\n"), taken
// from a loop that ran at the same time.
func (b *convBuilder) pairVerdicts() {
	for agent, convs := range b.byAgent {
		if len(convs) < 2 {
			continue
		}
		used := map[int]bool{}
		for _, c := range convs {
			call, ok := lastVerdictCall(c)
			if !ok {
				continue
			}
			for i, v := range b.verdicts {
				if used[i] || v.agent != agent || !reflect.DeepEqual(v.call, call) {
					continue
				}
				used[i] = true
				for _, o := range convs {
					if o.asked <= c.answered && c.asked <= o.answered && strings.HasPrefix(o.opening, "Claim:\n"+v.claim+"\n") {
						c.opening, o.opening = o.opening, c.opening
						break
					}
				}
				break
			}
		}
	}
}

// lastVerdictCall is the verdict call a loop ended with.
func lastVerdictCall(c *conversation) (verdictCall, bool) {
	if len(c.turns) == 0 {
		return verdictCall{}, false
	}
	for _, tc := range c.turns[len(c.turns)-1].resp.Message.ToolCalls {
		var v verdictCall
		if tc.Name == "verdict" && json.Unmarshal([]byte(tc.Arguments), &v) == nil {
			return v, true
		}
	}
	return verdictCall{}, false
}

func newConvBuilder(m *replayModel) *convBuilder {
	return &convBuilder{m: m, byAgent: map[string][]*conversation{}, open: map[string][]opening{},
		linked: map[string][]*conversation{}, byCall: map[[2]string]*conversation{}}
}

// request notes an agent's model_request.
func (b *convBuilder) request(e record.Event, mq *record.ModelRequest) {
	if mq.Turn <= 1 {
		o := opening{seq: e.Seq}
		for _, raw := range mq.Messages {
			if msg, err := b.m.message(raw); err == nil && msg.Role == llm.RoleUser {
				o.text = msg.Content
			}
		}
		b.open[e.Agent] = append(b.open[e.Agent], o)
		return
	}
	var c *conversation
	for _, raw := range mq.Messages {
		var msg llm.Message
		if json.Unmarshal(raw, &msg) == nil && msg.ToolCallID != "" {
			if c = b.byCall[[2]string{e.Agent, msg.ToolCallID}]; c != nil {
				break
			}
		}
	}
	b.linked[e.Agent] = append(b.linked[e.Agent], c)
}

// answered drops the oldest pending request of agent at turn (a reply or
// a model error answered it).
func (b *convBuilder) answered(agent string, turn int) *conversation {
	if turn <= 1 {
		if q := b.open[agent]; len(q) > 0 {
			b.open[agent] = q[1:]
		}
		return nil
	}
	var c *conversation
	if q := b.linked[agent]; len(q) > 0 {
		c, b.linked[agent] = q[0], q[1:]
	}
	return c
}

// turn adds a recorded reply of agent at its turn (1, 2, …).
func (b *convBuilder) turn(agent string, turn int, t recordedTurn) {
	convs := b.byAgent[agent]
	var c *conversation
	if turn <= 1 || len(convs) == 0 {
		c = &conversation{agent: agent, asked: t.seq, answered: t.seq}
		if q := b.open[agent]; len(q) > 0 {
			c.opening, c.asked = q[0].text, q[0].seq
		}
		b.answered(agent, turn)
		b.byAgent[agent] = append(convs, c)
	} else {
		c = b.answered(agent, turn)
		if c == nil || len(c.turns) != turn-1 {
			c = convs[len(convs)-1] // the latest loop that has made turn-1 turns
			for i := len(convs) - 1; i >= 0; i-- {
				if len(convs[i].turns) == turn-1 {
					c = convs[i]
					break
				}
			}
		}
	}
	c.turns = append(c.turns, t)
	for _, tc := range t.resp.Message.ToolCalls {
		b.byCall[[2]string{agent, tc.ID}] = c
	}
}

// conv finds the recorded conversation a live request belongs to, binding
// a new loop to the next one in recorded order; nil when the record has
// none left for it. m.mu is held.
func (m *replayModel) conv(req *llm.Request) *conversation {
	convs := m.convs[req.Agent]
	switch {
	case len(convs) == 0:
		return nil
	case len(convs) == 1:
		convs[0].bound = true
		return convs[0]
	}
	if req.Turn == 0 { // a new loop: the first conversation not yet played, its opening first
		opening := ""
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleUser {
				opening = msg.Content
			}
		}
		var pick *conversation
		for _, c := range convs {
			if !c.bound && c.opening == opening {
				pick = c
				break
			}
		}
		for _, c := range convs {
			if pick == nil && !c.bound {
				pick = c
			}
		}
		if pick != nil {
			pick.bound = true
		}
		return pick
	}
	var lastReply *llm.Message
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleAssistant {
			lastReply = &req.Messages[i]
			break
		}
	}
	var fallback *conversation
	for _, c := range convs {
		if !c.bound || c.last == nil {
			continue
		}
		if lastReply != nil && sameReply(*c.last, *lastReply) {
			return c
		}
		if c.next == req.Turn {
			fallback = c
		}
	}
	return fallback
}

// sameReply reports whether a live history's assistant message is the
// recorded reply handed out.
func sameReply(a, b llm.Message) bool {
	if a.Content != b.Content || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		if a.ToolCalls[i].ID != b.ToolCalls[i].ID || a.ToolCalls[i].Name != b.ToolCalls[i].Name {
			return false
		}
	}
	return true
}
