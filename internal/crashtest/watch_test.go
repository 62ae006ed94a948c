package crashtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// ev is what the harness reads of one event line.
type ev struct {
	Seq       int64  `json:"seq"`
	Type      string `json:"type"`
	Agent     string `json:"agent"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Action    string `json:"action"`
	Op        string `json:"op"`
	State     string `json:"state"`
	IsError   bool   `json:"is_error"`
	Assign    string `json:"assignment"`
}

func (e ev) String() string {
	s := e.Type
	switch {
	case e.Type == record.TypeToolCall || e.Type == record.TypeToolResult:
		s += " " + e.Name
	case e.Type == "lease":
		s += " " + e.Action
	case e.Type == "board":
		s += " " + e.Op
	case e.Type == "assignment":
		s += " " + e.State
	case e.Type == record.TypeFileDelta && strings.HasPrefix(e.CallID, "merge:"):
		s += " (merge)"
	}
	if e.Agent != "" {
		s += " [" + e.Agent + "]"
	}
	return s
}

// watch follows a run's events.jsonl as it grows: the complete lines so
// far, parsed once each.
type watch struct {
	path   string
	data   []byte // the complete lines
	events []ev
	// changers are the calls ("agent call_id") that changed workspace
	// files in the uncrashed run.
	changers map[string]bool
}

func newWatch(runDir string) *watch {
	return &watch{path: filepath.Join(runDir, record.EventsFile)}
}

// read takes in the lines completed since the last read.
func (w *watch) read() error {
	b, err := os.ReadFile(w.path)
	if err != nil {
		return err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	if !bytes.HasPrefix(b, w.data) {
		return fmt.Errorf("%s changed below its end: the first %d bytes seen before are not a prefix any more", w.path, len(w.data))
	}
	for _, line := range bytes.SplitAfter(b[len(w.data):], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e ev
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%s line %d: %v", w.path, len(w.events)+1, err)
		}
		w.events = append(w.events, e)
	}
	w.data = b
	return nil
}

func (w *watch) lines() int { return len(w.events) }

func (w *watch) finished() bool {
	return len(w.events) > 0 && w.events[len(w.events)-1].Type == record.TypeRunFinished
}

// inFlight lists the tool calls recorded without a result, as
// "agent:name:arguments".
func (w *watch) inFlight() []string {
	open := map[string]string{}
	var order []string
	for _, e := range w.events {
		k := e.Agent + "\x00" + e.CallID
		switch e.Type {
		case record.TypeToolCall:
			open[k] = e.Agent + ":" + e.Name + ":" + e.Arguments
			order = append(order, k)
		case record.TypeToolResult:
			delete(open, k)
		case record.TypeModelResponse:
			// a call id is unique within a turn; a replayed turn reuses
			// it, so a new reply forgets the previous turn's calls
			for _, k2 := range order {
				if strings.HasPrefix(k2, e.Agent+"\x00") {
					delete(open, k2)
				}
			}
		}
	}
	var out []string
	for _, k := range order {
		if v, ok := open[k]; ok && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// moment is what the record says was going on when it was read.
type moment struct {
	modelInFlight bool     // an agent's model call has no reply yet
	toolsInFlight []string // see inFlight
	leaseGranted  bool     // the last event granted the lease
	claimPending  bool     // a claim_outputs was granted, its result not recorded
	merging       bool     // a subagent's worktree was merged, its end not recorded
	finalizing    bool     // the coordinator's finish was accepted, run_finished not recorded
	coordinating  bool     // a lead tool's board or assignment event is the last, its result not recorded
	deltaPending  bool     // the last event is the result of a subagent call that changes workspace files
	finished      bool
}

func (w *watch) moment(coordinator string) moment {
	var m moment
	awaiting := map[string]bool{}
	merged := map[string]bool{}
	for _, e := range w.events {
		switch e.Type {
		case record.TypeModelRequest:
			awaiting[e.Agent] = true
		case record.TypeModelResponse:
			awaiting[e.Agent] = false
		case "merge":
			merged[e.Agent] = true
		case "assignment":
			switch e.State {
			case "reported", "failed", "cancelled", "timeout":
				merged[e.Assign] = false
			}
		case record.TypeToolResult:
			if e.Agent == coordinator && e.Name == "finish" && !e.IsError {
				m.finalizing = true
			}
		}
	}
	for _, a := range awaiting {
		m.modelInFlight = m.modelInFlight || a
	}
	for _, a := range merged {
		m.merging = m.merging || a
	}
	m.toolsInFlight = w.inFlight()
	if n := len(w.events); n > 0 {
		last := w.events[n-1]
		m.leaseGranted = last.Type == "lease" && last.Action == "granted"
	}
	m.claimPending = w.leaseUnanswered()
	if n := len(w.events); n > 0 {
		last := w.events[n-1]
		m.deltaPending = last.Type == record.TypeToolResult && last.Agent != coordinator && w.changers[last.Agent+" "+last.CallID]
	}
	if n := len(w.events); n > 0 && (w.events[n-1].Type == "board" || w.events[n-1].Type == "assignment") {
		for _, c := range m.toolsInFlight {
			for _, name := range []string{"board_add", "board_resolve", "dispatch"} {
				m.coordinating = m.coordinating || strings.HasPrefix(c, "lead:"+name+":")
			}
		}
	}
	m.finished = w.finished()
	m.finalizing = m.finalizing && !m.finished
	return m
}

// categories names what a kill at this moment interrupts.
func (w *watch) categories(coordinator string) []string {
	m := w.moment(coordinator)
	var cats []string
	add := func(ok bool, c string) {
		if ok {
			cats = append(cats, c)
		}
	}
	add(len(w.events) <= 2, "run start")
	add(m.modelInFlight, "model call in flight")
	add(len(m.toolsInFlight) > 0, "tool call in flight")
	add(slices.ContainsFunc(m.toolsInFlight, func(c string) bool { return strings.Contains(c, ":bash:") }), "bash in flight")
	add(m.leaseGranted, "just after lease grant")
	add(m.claimPending, "lease granted, claim unanswered")
	add(m.merging, "between merge and report")
	add(m.finalizing, "finalization")
	add(len(w.events) > 0 && w.events[len(w.events)-1].Type == "message", "just after a user message was recorded")
	add(m.deltaPending, "subagent file change: result recorded, file_delta not")
	add(len(tempFiles(filepath.Dir(w.path))) > 0, "atomic write in flight (temp file)")
	add(m.coordinating, "lead coordination call: effect recorded, result not")
	add(m.finished, "after run_finished")
	add(len(cats) == 0, "step boundary (nothing in flight)")
	return cats
}

// lastTypes describes the last n events before the kill, oldest first.
func (w *watch) lastTypes(n int) string {
	from := max(len(w.events)-n, 0)
	var parts []string
	for _, e := range w.events[from:] {
		parts = append(parts, e.String())
	}
	return strings.Join(parts, " → ")
}

// leaseUnanswered: a claim_outputs call was granted the lease, and the kill
// came before its result was recorded.
func (w *watch) leaseUnanswered() bool {
	claim := map[string]bool{} // agent -> claim_outputs in flight
	granted := map[string]bool{}
	for _, e := range w.events {
		switch {
		case e.Type == record.TypeToolCall && e.Name == "claim_outputs":
			claim[e.Agent], granted[e.Agent] = true, false
		case e.Type == "lease" && e.Action == "granted":
			granted[e.Agent] = true
		case e.Type == record.TypeToolResult && e.Name == "claim_outputs":
			claim[e.Agent] = false
		}
	}
	for a, c := range claim {
		if c && granted[a] {
			return true
		}
	}
	return false
}
