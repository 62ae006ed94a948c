package team

import (
	"strconv"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/synth"
	"github.com/apodex/apodex/internal/verify/claim"
)

// Prefixes of the ids of the agents the runtime starts: verifiers V1, V2, …,
// investigators I1, …, writers W1, ….
const (
	verifierPrefix     = claim.VerifierPrefix
	investigatorPrefix = claim.InvestigatorPrefix
	writerPrefix       = synth.WriterPrefix
)

// agentIDs numbers the agents the runtime starts. Verifiers serving the
// lead's verify calls are numbered in the order of those calls on the
// record (the calls of one turn run in parallel, so the order they start
// in is not reproducible; the order the loop recorded them in is), others
// as they start. The caller holds t.mu.
type agentIDs struct {
	next   map[string]int    // prefix -> last number given
	byCall map[string]string // the lead's verify call id -> its verifier
	// cur follows the log for verify calls and agent ids (nil until the
	// first scan).
	cur *record.Cursor
}

// takeID gives the next id of prefix, after every id the record holds
// (a resumed run's too); the caller holds t.mu.
func (t *Team) takeID(prefix string) string {
	t.scanVerifyCalls()
	return t.bumpID(prefix)
}

func (t *Team) bumpID(prefix string) string {
	if t.ids.next == nil {
		t.ids.next = map[string]int{}
	}
	t.ids.next[prefix]++
	return prefix + strconv.Itoa(t.ids.next[prefix])
}

// verifierID is the id of the verifier serving the lead's verify call
// callID (a fresh one when the call is not on the record); the caller
// holds t.mu.
func (t *Team) verifierID(callID string) string {
	t.scanVerifyCalls()
	if id, ok := t.ids.byCall[callID]; ok && callID != "" {
		return id
	}
	return t.bumpID(verifierPrefix)
}

// scanVerifyCalls numbers the lead's verify calls recorded since the last
// scan, in record order; agent_started events already on the record (a
// resumed run's) keep their ids. The caller holds t.mu.
func (t *Team) scanVerifyCalls() {
	if t.cfg.Log == nil {
		return
	}
	if t.ids.byCall == nil {
		t.ids.byCall = map[string]string{}
	}
	if t.ids.cur == nil {
		cur, err := t.cfg.Log.Cursor(0, record.TypeToolCall, record.TypeAgentStarted, record.TypeEffort)
		if err != nil {
			return // a closed log: nothing more is recorded
		}
		t.ids.cur = cur
	}
	evs, _ := t.ids.cur.Next() // the events before an error are good; a closed log has no more
	for _, e := range evs {
		p, err := record.DecodePayload(e)
		if err != nil {
			continue // the runtime wrote it: it decodes
		}
		switch p := p.(type) {
		case *record.ToolCall:
			if p.Name == "verify" && e.Agent == "lead" {
				if _, ok := t.ids.byCall[p.CallID]; !ok {
					t.ids.byCall[p.CallID] = t.bumpID(verifierPrefix)
				}
			}
		case *record.Effort:
			if p.Investigator != "" {
				t.noteID(p.Investigator) // a record from before agent_started
			}
		case *record.AgentStarted:
			t.noteID(e.Agent)
			if p.Role == llm.CallerVerifier && p.CallID != "" {
				t.ids.byCall[p.CallID] = e.Agent
			}
		}
	}
}

// noteID makes the numbering of id's prefix go on after id.
func (t *Team) noteID(id string) {
	if len(id) < 2 {
		return
	}
	n, err := strconv.Atoi(id[1:])
	if err != nil {
		return
	}
	if t.ids.next == nil {
		t.ids.next = map[string]int{}
	}
	t.ids.next[id[:1]] = max(t.ids.next[id[:1]], n)
}

// started records that the runtime started agent id; the caller holds t.mu.
func (t *Team) started(id string, a record.AgentStarted) {
	if a.Parent == "" {
		a.Parent = "lead"
	}
	t.record(record.TypeAgentStarted, id, a)
}
