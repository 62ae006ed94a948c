package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// replayModel is an llm.Model that answers with the outputs a record holds:
// an agent's turns in the order it made them, the tier-2 summaries, the
// finalization replies and the verifier's verdicts. It never invents a
// reply: a call the record has no answer for fails, and is noted as a
// divergence (the agent's loop then ends with model_error).
//
// An agent's turns are handed out per conversation (convs.go), in the
// order recorded. Turns are handed out in the record's global order of
// effects: a turn
// recorded at seq s waits until the replay's own record holds every
// tracked event (see ordered) the original held before s, so concurrent
// subagents see each other's effects in the recorded order. The wait is
// bounded; past it the turn goes ahead and the ordering is noted as not
// kept (and no longer enforced).
type replayModel struct {
	dir string // the original run (its blobs)

	mu        sync.Mutex
	convs     map[string][]*conversation // agent -> its loops as recorded
	finals    map[string][]llm.Response
	nextFinal map[string]int
	modelErrs map[string]string // agent -> the model error its loop ended with
	// stopped: agent -> how long its call past the recorded turns may wait
	// for its context to end, when the original stopped it from outside
	// (a deadline, a timeout, the lead's end) while it was working.
	stopped   map[string]time.Duration
	summaries []recordedSummary
	handed    []string // summaries handed out, for continuation chunks
	verdicts  []recordedVerdict
	anomalies []Divergence
	notes     []string
	// limit is the last seq of the segment being replayed (0: none): a turn
	// recorded after it waits for the next segment, as the original's did.
	limit int64

	gate *orderGate
}

var _ llm.Model = (*replayModel)(nil)

type recordedTurn struct {
	seq  int64
	resp llm.Response
}

type recordedSummary struct {
	seq   int64
	agent string
	turn  int // the agent's turns before the compaction (the request's Turn)
	text  string
	used  bool
}

type recordedVerdict struct {
	seq  int64
	v    record.Verdict
	used bool
}

// storedMessage is a message as the agent loop records it.
type storedMessage struct {
	llm.Message
	ContentRef string `json:"content_ref,omitempty"`
}

// newReplayModel reads the replies out of the original record.
func newReplayModel(dir string, events []event, st run.Settings, gate *orderGate) (*replayModel, error) {
	m := &replayModel{dir: dir,
		finals: map[string][]llm.Response{}, nextFinal: map[string]int{}, modelErrs: map[string]string{},
		stopped: stoppedAgents(events, st, gate.wait), gate: gate}
	convs := newConvBuilder(m)
	finalizing := map[string]bool{}
	turnsSoFar := map[string]int{}
	for _, e := range events {
		switch p := e.p.(type) {
		case *record.Observation:
			if p.Kind == "finalize" {
				finalizing[e.Agent] = true
			}
		case *record.ModelRequest:
			convs.request(e.Event, p)
		case *record.ModelResponse:
			mr := *p
			if mr.Purpose == record.PurposeSummary || mr.Purpose == record.PurposeVerify {
				continue // answered from the compaction and verdict events
			}
			msg, err := m.message(mr.Message)
			if err != nil {
				return nil, fmt.Errorf("run: replay: reply at seq %d: %w", e.Seq, err)
			}
			resp := llm.Response{Message: msg, Usage: mr.Usage, FinishReason: mr.FinishReason, Model: mr.Model}
			turnsSoFar[e.Agent]++
			if finalizing[e.Agent] {
				finalizing[e.Agent] = false
				convs.answered(e.Agent, mr.Turn)
				m.finals[e.Agent] = append(m.finals[e.Agent], resp)
				continue
			}
			convs.turn(e.Agent, mr.Turn, recordedTurn{seq: e.Seq, resp: resp})
			delete(m.modelErrs, e.Agent)
		case *record.ModelError:
			m.modelErrs[e.Agent] = p.Error
			convs.answered(e.Agent, p.Turn)
		case *record.Compaction:
			if p.Summarized != nil {
				m.summaries = append(m.summaries, recordedSummary{seq: e.Seq, agent: e.Agent, turn: turnsSoFar[e.Agent], text: p.Summarized.Summary})
			}
		case *record.Verdict:
			m.verdicts = append(m.verdicts, recordedVerdict{seq: e.Seq, v: *p})
			convs.verdict(e.Agent, p)
		}
	}
	convs.pairVerdicts()
	m.convs = convs.byAgent
	return m, nil
}

// stoppedAgents finds the agents the original stopped from outside while
// they worked, and how long a replay waits for the same stop: the run's
// limit (soft deadline, timeout, a subagent's time budget) and then some,
// or the order wait for a subagent cancelled when the lead ended.
func stoppedAgents(events []event, st run.Settings, wait time.Duration) map[string]time.Duration {
	limit := max(st.SoftDeadline, st.Timeout, st.Team.SubTimeout).D() + wait
	out := map[string]time.Duration{}
	byClock := func(reason string) bool {
		for _, t := range []string{"soft_deadline", "hard_timeout"} {
			if strings.HasPrefix(reason, t) {
				return true
			}
		}
		return false
	}
	coordinator := "main"
	for _, e := range events {
		switch p := e.p.(type) {
		case *record.Assignment:
			a := p
			if e.Agent == "lead" {
				continue
			}
			switch {
			case a.State == record.AssignmentTimeout || a.State == record.AssignmentFailed && byClock(a.Reason):
				out[e.Agent] = limit
			case a.State == record.AssignmentCancelled && strings.Contains(a.Reason, record.ReasonLeadDone):
				out[e.Agent] = wait
			}
		case *record.ModelResponse:
			if e.Agent == "lead" {
				coordinator = "lead"
			}
		case *record.RunFinished:
			rf := p
			switch {
			case byClock(rf.Termination):
				out[coordinator] = limit
			case rf.Termination == "cancelled": // the replay delivers the same cancel
				out[coordinator] = wait
			}
		}
	}
	return out
}

// message decodes a recorded message, its body from its blob if it has one.
func (m *replayModel) message(raw json.RawMessage) (llm.Message, error) {
	var s storedMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		return llm.Message{}, err
	}
	if s.ContentRef != "" {
		b, err := record.ReadBlob(m.dir, s.ContentRef)
		if err != nil {
			return llm.Message{}, fmt.Errorf("message body %s: %w", s.ContentRef, err)
		}
		s.Message.Content = string(b)
	}
	return s.Message, nil
}

// errNoRecordedReply ends a loop that asks for more than the record holds.
var errNoRecordedReply = errors.New("replay: the record holds no reply for this call")

// Generate answers one call from the record.
func (m *replayModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch req.Purpose {
	case llm.PurposeSummary:
		return m.summary(req)
	case llm.PurposeVerify:
		m.mu.Lock()
		agentTurns := len(m.convs[req.Agent]) > 0
		m.mu.Unlock()
		if !agentTurns { // a record of the one-call verifier
			return m.verdict(req)
		}
	case llm.PurposeFinalize:
		return m.finalize(req)
	}
	m.mu.Lock()
	c := m.conv(req)
	if c == nil || c.next >= len(c.turns) {
		m.mu.Unlock()
		return nil, m.pastTheRecord(ctx, req.Agent, c)
	}
	i := c.next
	t := c.turns[i]
	if m.limit > 0 && t.seq > m.limit {
		m.mu.Unlock()
		<-ctx.Done() // the segment's stop comes first
		return nil, context.Cause(ctx)
	}
	c.next, c.last = i+1, &t.resp.Message
	m.mu.Unlock()
	if note := m.gate.await(ctx, t.seq, req.Agent); note != "" {
		m.note(note)
	}
	if ctx.Err() != nil { // stopped while held: the turn was not made
		m.mu.Lock()
		c.next = i
		if i > 0 {
			c.last = &c.turns[i-1].resp.Message
		}
		m.mu.Unlock()
		return nil, context.Cause(ctx)
	}
	resp := t.resp
	resp.Message.ToolCalls = append([]llm.ToolCall(nil), t.resp.Message.ToolCalls...)
	return &resp, nil
}

// pastTheRecord answers a turn the record does not hold (c has no turn
// left, or is nil: no conversation of the agent is left): as the original
// ended there (its model error; or, when something stopped it in that
// call, waiting for the replay's own stop), else as a divergence.
func (m *replayModel) pastTheRecord(ctx context.Context, agent string, c *conversation) error {
	m.mu.Lock()
	text, failed := m.modelErrs[agent]
	delete(m.modelErrs, agent)
	bound, stopped := m.stopped[agent]
	m.mu.Unlock()
	if failed {
		return errors.New(text)
	}
	if stopped {
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var turns []recordedTurn
	if c != nil {
		turns = c.turns
	}
	var last int64
	if len(turns) > 0 {
		last = turns[len(turns)-1].seq
	} else if cs := m.convs[agent]; len(cs) > 0 { // a loop more than the record holds
		t := cs[len(cs)-1].turns
		last = t[len(t)-1].seq
	}
	i := len(turns)
	m.anomalies = append(m.anomalies, Divergence{Class: ClassPolicy, Kind: KindTurns, Seq: last, After: true, Agent: agent, What: fmt.Sprintf("model turn %d", i+1),
		Expected: fmt.Sprintf("no turn %d: the agent made %d turns", i+1, len(turns)), Got: fmt.Sprintf("the agent asked for turn %d", i+1)})
	return fmt.Errorf("%w (agent %s asked for turn %d; the record has %d)", errNoRecordedReply, agent, i+1, len(turns))
}

func (m *replayModel) finalize(req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.nextFinal[req.Agent]
	if i >= len(m.finals[req.Agent]) {
		return nil, fmt.Errorf("%w (finalization of agent %s)", errNoRecordedReply, req.Agent)
	}
	m.nextFinal[req.Agent] = i + 1
	resp := m.finals[req.Agent][i]
	return &resp, nil
}

// summaryChunk starts every summary call after the first of one compaction.
const summaryChunk = "Summary so far:\n"

// summary answers a tier-2 summary call with the summary the compaction
// recorded. Only the last of a compaction's chunked calls is recorded, so
// every chunk gets it: a continuation (its prompt carries the summary so
// far) gets the summary it continues, which makes the final one the same.
func (m *replayModel) summary(req *llm.Request) (*llm.Response, error) {
	prompt := ""
	if n := len(req.Messages); n > 0 {
		prompt = req.Messages[n-1].Content
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rest, ok := strings.CutPrefix(prompt, summaryChunk); ok {
		for i := len(m.handed) - 1; i >= 0; i-- {
			if strings.HasPrefix(rest, m.handed[i]+"\n\n") {
				return textReply(m.handed[i]), nil
			}
		}
	}
	pick := -1
	for i, s := range m.summaries {
		if s.used || s.turn != req.Turn || (req.Agent != "" && s.agent != req.Agent) {
			continue
		}
		pick = i
		break
	}
	if pick < 0 {
		m.anomalies = append(m.anomalies, Divergence{Class: ClassPolicy, Kind: KindModel, Agent: req.Agent, What: "summary call",
			Expected: "no compaction summary at this point", Got: fmt.Sprintf("a summary call at turn %d", req.Turn), Seq: m.lastSeq()})
		return nil, fmt.Errorf("%w (summary at turn %d)", errNoRecordedReply, req.Turn)
	}
	m.summaries[pick].used = true
	m.handed = append(m.handed, m.summaries[pick].text)
	return textReply(m.summaries[pick].text), nil
}

// verdict answers a verifier call with the recorded verdict on the same
// claim (calls of one turn run in parallel, so the record's order of
// verdicts is not the call order); the answer is the verdict as JSON, which
// the team parses back to the same verdict.
func (m *replayModel) verdict(req *llm.Request) (*llm.Response, error) {
	claim := ""
	if n := len(req.Messages); n > 0 {
		claim, _, _ = strings.Cut(strings.TrimPrefix(req.Messages[n-1].Content, "Claim:\n"), "\n\nEvidence:\n")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pick := -1
	for i, v := range m.verdicts {
		if !v.used && v.v.Claim == claim {
			pick = i
			break
		}
	}
	if pick < 0 {
		m.anomalies = append(m.anomalies, Divergence{Class: ClassPolicy, Kind: KindModel, Agent: "verifier", What: "verifier call",
			Expected: "no verification of this claim", Got: fmt.Sprintf("verify %q", claim), Seq: m.lastSeq()})
		return nil, fmt.Errorf("%w (verdict on %q)", errNoRecordedReply, claim)
	}
	m.verdicts[pick].used = true
	v := m.verdicts[pick].v
	v.Claim = ""
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return textReply(string(raw)), nil
}

// lastSeq is the seq of the last turn handed out (where an unexpected
// runtime call is placed); m.mu is held.
func (m *replayModel) lastSeq() int64 {
	var s int64
	for _, cs := range m.convs {
		for _, c := range cs {
			if c.next > 0 {
				s = max(s, c.turns[c.next-1].seq)
			}
		}
	}
	return s
}

// setLimit starts the segment that ends at seq (0: the last one).
func (m *replayModel) setLimit(seq int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limit = seq
}

func (m *replayModel) note(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes = append(m.notes, s)
}

// unconsumed lists, per conversation, the first recorded turn the replay
// never asked for.
func (m *replayModel) unconsumed() []Divergence {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Divergence
	for agent, cs := range m.convs {
		for _, c := range cs {
			i := c.next
			if i >= len(c.turns) {
				continue
			}
			d := Divergence{Class: ClassPolicy, Kind: KindTurns, Seq: c.turns[i].seq, Agent: agent, What: fmt.Sprintf("model turn %d", i+1),
				Expected: fmt.Sprintf("the agent asks for turn %d of %d", i+1, len(c.turns)), Got: fmt.Sprintf("the agent stopped after %d turns", i)}
			if !c.bound {
				d.Got = "the replay never started this loop of the agent"
			}
			out = append(out, d)
		}
	}
	return out
}

func textReply(s string) *llm.Response {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: s}, FinishReason: "stop", Model: "replay"}
}
