package team

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
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
	// off is how far the record was read for verify calls.
	off int64
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
	f, err := os.Open(filepath.Join(t.cfg.Log.Dir(), record.EventsFile))
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(t.ids.off, io.SeekStart); err != nil {
		return
	}
	br := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return // the end, or a line still being written: read it next time
		}
		t.ids.off += int64(len(line))
		if !bytes.Contains(line, []byte(`"type":"tool_call"`)) && !bytes.Contains(line, []byte(`"type":"agent_started"`)) &&
			!bytes.Contains(line, []byte(`"type":"effort"`)) {
			continue
		}
		var e struct {
			Type   string `json:"type"`
			Agent  string `json:"agent"`
			Name   string `json:"name"`
			CallID string `json:"call_id"`
			Role   string `json:"role"`
			// Investigator names an effort event's investigator.
			Investigator string `json:"investigator"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		switch {
		case e.Type == record.TypeToolCall && e.Name == "verify" && e.Agent == "lead":
			if _, ok := t.ids.byCall[e.CallID]; !ok {
				t.ids.byCall[e.CallID] = t.bumpID(verifierPrefix)
			}
		case e.Type == record.TypeEffort && e.Investigator != "":
			t.noteID(e.Investigator) // a record from before agent_started
		case e.Type == record.TypeAgentStarted:
			t.noteID(e.Agent)
			if e.Role == llm.CallerVerifier && e.CallID != "" {
				t.ids.byCall[e.CallID] = e.Agent
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
