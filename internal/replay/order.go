package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// A stream is what an agent's events count under (keysOf). The ordered
// streams (the first four) are the events whose order across agents a
// replay keeps: the turns, the tool results and file changes (which carry the effects one
// agent can see of another), and assignment state changes. Left out: what
// the replay cannot or need not reproduce (user messages and controls,
// retries, warnings, wall-clock observations such as wrap-up notices,
// compaction bookkeeping), what a tool result already orders (board
// mutations, leases taken, verdicts), and what a subagent does after its
// last step (lease release, merge and its file changes, report), where the
// gate holds it: waiting for those could wait for itself.
type stream uint8

const (
	streamResponse   stream = iota // model_response (a turn; not a summary or verifier reply)
	streamResult                   // tool_result
	streamDelta                    // file_delta (not a merge's)
	streamAssignment               // assignment
	streamRequest                  // model_request: the agent has taken its notices and messages for the turn
	streamCall                     // tool_call: a call has started (a control or a stop may cut it)
	// Finer streams for what decides which notices the lead reads
	// together: its wait results and its notice observations.
	streamWait
	streamNotices
)

// ordered reports a stream whose order across agents a replay keeps.
func (s stream) ordered() bool { return s <= streamAssignment }

// String names the stream as a replay's note does.
func (s stream) String() string {
	return [...]string{record.TypeModelResponse, record.TypeToolResult, record.TypeFileDelta, record.TypeAssignment,
		record.TypeModelRequest, record.TypeToolCall, record.TypeToolResult + ":wait", record.TypeObservation + ":assignments"}[s]
}

type orderKey struct {
	agent string
	s     stream
}

// orderGate holds agents back until the replay's record has caught up with
// the original's, at three points of an agent's loop:
//   - before a turn is handed out (await): every ordered event the
//     original recorded before that turn;
//   - after the last tool result of a turn (step): the other agents'
//     ordered events recorded before the agent's next event (its next
//     request, or the notices it is handed first);
//   - after a subagent's last tool result (step): the other agents'
//     assignment changes and the lead's collections of notices recorded
//     before the subagent's end, which decide which notices the lead reads
//     together.
//
// A hold never waits for something the original recorded after the point
// it holds, so a replay that does what the record says cannot deadlock; one
// that does not is let go after the bounded wait. The gate tails the
// replay's events.jsonl.
type orderGate struct {
	wait     time.Duration
	want     map[orderKey][]int64 // original seqs of each key's events, ascending
	boundary map[string][]int64   // agent -> per tool result: the seq of its next own event when that ends a turn, else 0
	ends     map[string]int64     // subagent -> seq of its last assignment event
	told     map[string]int64     // subagent -> seq where the lead got its notice (a wait result or an observation); past the end if never

	mu     sync.Mutex
	done   map[string]int // agent -> tool results seen in the replay
	path   string         // the replay's event log
	f      *os.File
	buf    []byte
	have   map[orderKey]int
	lines  int  // complete lines of the replay's log read so far
	broken bool // the order could not be kept once: no longer enforced
}

func newOrderGate(events []event, replayDir string, wait time.Duration) *orderGate {
	g := &orderGate{wait: wait, want: map[orderKey][]int64{}, have: map[orderKey]int{},
		boundary: map[string][]int64{}, ends: map[string]int64{}, told: map[string]int64{}, done: map[string]int{},
		path: filepath.Join(replayDir, record.EventsFile)}
	open := map[string]int{} // agent -> index of its last tool result, while its next event is unknown
	for _, e := range events {
		p := e.p
		for _, k := range keysOf(p, e.Agent) {
			g.want[k] = append(g.want[k], e.Seq)
		}
		_, result := p.(*record.ToolResult)
		if i, ok := open[e.Agent]; ok {
			if _, delta := p.(*record.FileDelta); !delta {
				if !result { // the turn's results are all in
					g.boundary[e.Agent][i] = e.Seq
				}
				delete(open, e.Agent)
			}
		}
		switch p.(type) {
		case *record.ToolResult:
			g.boundary[e.Agent] = append(g.boundary[e.Agent], 0)
			open[e.Agent] = len(g.boundary[e.Agent]) - 1
		case *record.Assignment:
			if e.Agent != "lead" {
				g.ends[e.Agent] = e.Seq
			}
		}
	}
	g.notices(events)
	return g
}

// notices finds where the lead was told of each subagent's end, and moves
// the lead's holds between turns before the ends it was not told of then.
//
// The lead collects notices at the start of each turn (before its request
// is recorded; an empty collection leaves no event) and in wait. A notice
// told later than the lead's next request was issued after that turn's
// collection, although the request may be recorded after the end: so the
// subagent's end must wait for that request (see step), and the lead must
// not wait for that end before its collection.
func (g *orderGate) notices(events []event) {
	lastStep := map[string]int64{}
	for _, e := range events {
		if _, ok := e.p.(*record.ToolResult); ok {
			lastStep[e.Agent] = e.Seq
		}
	}
	endStart := map[string]int64{} // subagent -> first event of its end: its report, or its last state
	for _, e := range events {
		if _, sub := g.ends[e.Agent]; !sub || endStart[e.Agent] != 0 || e.Seq <= lastStep[e.Agent] {
			continue
		}
		switch e.p.(type) {
		case *record.Report, *record.Assignment:
			endStart[e.Agent] = e.Seq
		}
	}
	never := int64(len(events)) + 1
	for x, end := range g.ends {
		g.told[x] = never
		mark := "Assignment " + x + " ("
		for _, e := range events {
			if e.Seq <= end || e.Agent != "lead" {
				continue
			}
			var text string
			switch p := e.p.(type) {
			case *record.ToolResult:
				if p.Name == "wait" {
					text = p.Output
				}
			case *record.Observation:
				if p.Kind == "assignments" {
					text = p.Text
				}
			}
			if strings.HasPrefix(text, mark) || strings.Contains(text, "\n"+mark) {
				g.told[x] = e.Seq
				break
			}
		}
	}
	for i, n := range g.boundary["lead"] {
		for x, start := range endStart {
			if n > 0 && start < n && g.told[x] > n {
				g.boundary["lead"][i] = min(g.boundary["lead"][i], start)
			}
		}
	}
}

// keysOf are the keys an event of payload p counts under.
func keysOf(p any, agent string) []orderKey {
	var ks []stream
	switch p := p.(type) {
	case *record.ModelResponse:
		// A summary or verifier reply is not a turn, and absent from
		// records of earlier versions, so it orders nothing.
		if p.Purpose != record.PurposeSummary && p.Purpose != record.PurposeVerify {
			ks = append(ks, streamResponse)
		}
	case *record.ToolResult:
		ks = append(ks, streamResult)
		if p.Name == "wait" {
			ks = append(ks, streamWait)
		}
	case *record.FileDelta:
		if !strings.HasPrefix(p.CallID, "merge:") {
			ks = append(ks, streamDelta)
		}
	case *record.Assignment:
		ks = append(ks, streamAssignment)
	case *record.ModelRequest:
		ks = append(ks, streamRequest)
	case *record.ToolCall:
		ks = append(ks, streamCall)
	case *record.Observation:
		if p.Kind == "assignments" {
			ks = append(ks, streamNotices)
		}
	}
	out := make([]orderKey, len(ks))
	for i, st := range ks {
		out[i] = orderKey{agent, st}
	}
	return out
}

// turnKeys are what a turn waits for: every ordered event.
func turnKeys(k orderKey) bool { return k.s.ordered() }

// othersKeys are what an agent between turns waits for: the others'
// ordered events and notice collections.
func othersKeys(self string) func(orderKey) bool {
	return func(k orderKey) bool {
		return k.agent != self && (k.s.ordered() || k.s == streamNotices)
	}
}

// endKeys are what a subagent's end waits for: the others' assignment
// changes, and where the lead was in collecting notices (its requests,
// wait results and notice observations).
func endKeys(self string) func(orderKey) bool {
	return func(k orderKey) bool {
		switch k.s {
		case streamAssignment:
			return k.agent != self
		case streamWait, streamNotices, streamRequest:
			return k.agent == "lead"
		}
		return false
	}
}

// leadRequests are the lead's requests (each marks a collection of notices).
func leadRequests(k orderKey) bool { return k.agent == "lead" && k.s == streamRequest }

// step is called after each tool result of agent in the replay (by the
// agent's own goroutine, before it goes on).
func (g *orderGate) step(agent string) string {
	g.mu.Lock()
	i := g.done[agent]
	g.done[agent]++
	var next int64
	if b := g.boundary[agent]; i < len(b) {
		next = b[i]
	}
	last := i == len(g.boundary[agent])-1
	end, isSub := g.ends[agent]
	told := g.told[agent]
	g.mu.Unlock()
	if next > 0 {
		if note := g.hold(context.Background(), next, agent, "the next turn of", othersKeys(agent)); note != "" {
			return note
		}
	}
	if !last || !isSub {
		return ""
	}
	if note := g.hold(context.Background(), end, agent, "the end of", endKeys(agent)); note != "" {
		return note
	}
	return g.hold(context.Background(), told, agent, "the notice of", leadRequests)
}

// await blocks until every ordered event recorded before seq in the
// original is in the replay's record, or the wait runs out; it returns a
// note when the order could not be kept.
func (g *orderGate) await(ctx context.Context, seq int64, agent string) string {
	return g.hold(ctx, seq, agent, "the turn of", turnKeys)
}

// hold waits until every event under keys recorded before seq in the
// original is in the replay's record.
func (g *orderGate) hold(ctx context.Context, seq int64, agent, what string, keys func(orderKey) bool) string {
	deadline := time.Now().Add(g.wait)
	pause := 200 * time.Microsecond
	for {
		g.mu.Lock()
		if g.broken {
			g.mu.Unlock()
			return ""
		}
		g.refresh()
		lag := g.lagging(seq, keys)
		if lag == "" {
			g.mu.Unlock()
			return ""
		}
		if time.Now().After(deadline) {
			g.broken = true
			g.mu.Unlock()
			return fmt.Sprintf("the recorded order could not be kept: %s %s (original seq %d) waited %s for %s; from there on the agents went ahead without waiting", what, agent, seq, g.wait, lag)
		}
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// lagging names what the replay still lacks of the events before seq, or
// is ""; g.mu is held.
func (g *orderGate) lagging(seq int64, keys func(orderKey) bool) string {
	for k, seqs := range g.want {
		if !keys(k) {
			continue
		}
		need := sort.Search(len(seqs), func(i int) bool { return seqs[i] >= seq })
		if g.have[k] < need {
			return fmt.Sprintf("%s event %d of %s (seq %d)", k.s, g.have[k]+1, agentName(k.agent), seqs[g.have[k]])
		}
	}
	return ""
}

// refresh reads the lines appended to the replay's log since the last
// call; g.mu is held. A line still being written is kept for the next call.
func (g *orderGate) refresh() {
	if g.f == nil {
		f, err := os.Open(g.path)
		if err != nil {
			return // not created yet
		}
		g.f = f
	}
	for {
		if cap(g.buf)-len(g.buf) < 16<<10 {
			g.buf = append(make([]byte, 0, max(2*cap(g.buf), 64<<10)), g.buf...)
		}
		n, err := g.f.Read(g.buf[len(g.buf):cap(g.buf)])
		g.buf = g.buf[:len(g.buf)+n]
		if n == 0 || err != nil {
			break // io.EOF: caught up
		}
	}
	rest := g.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		if typ, agent, ok := envelope(rest[:i]); ok {
			p, _ := record.DecodePayload(record.Event{Type: typ, Agent: agent, Raw: rest[:i]})
			for _, k := range keysOf(p, agent) {
				g.have[k]++
			}
		}
		g.lines++
		rest = rest[i+1:]
	}
	g.buf = g.buf[:copy(g.buf, rest)] // keep a line still being written
}

// allKeys are what a user's input or a stop waits for: every event the gate
// tracks, the started calls among them.
func allKeys(k orderKey) bool { return true }

// caughtUp waits until the replay's record holds every tracked event the
// original recorded before seq (see hold); it returns the replay's line
// count then and a note when the order could not be kept.
func (g *orderGate) caughtUp(ctx context.Context, seq int64, what string) (lines int, note string) {
	note = g.hold(ctx, seq, "", what, allKeys)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refresh()
	return g.lines, note
}

// cut truncates the replay's log to its first n lines, as a kill after them
// would have left it, and reads it again from the start: what the stopped
// process recorded after the point is gone, as in the original.
func (g *orderGate) cut(n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := record.Cut(filepath.Dir(g.path), n); err != nil {
		return err
	}
	if g.f != nil {
		g.f.Close()
		g.f = nil
	}
	g.buf, g.lines, g.have = g.buf[:0], 0, map[orderKey]int{}
	g.refresh()
	g.done = map[string]int{} // the steps kept: one per tool result
	for k, n := range g.have {
		if k.s == streamResult {
			g.done[k.agent] = n
		}
	}
	return nil
}

func (g *orderGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f != nil {
		g.f.Close()
	}
}

// envelope reads an event line's type and agent. The record writes the
// envelope first (seq, time, type, agent), so they are found near the
// start without decoding the payload; anything else is decoded in full.
func envelope(line []byte) (typ, agent string, ok bool) {
	head := line[:min(len(line), 512)]
	t, okT := field(head, `,"type":`)
	a, okA := field(head, `,"agent":`)
	if okT && okA {
		return t, a, true
	}
	var e struct{ Type, Agent string }
	if json.Unmarshal(line, &e) != nil {
		return "", "", false
	}
	return e.Type, e.Agent, true
}

// field reads the JSON string after key in b.
func field(b []byte, key string) (string, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return "", false
	}
	rest := b[i+len(key):]
	if len(rest) == 0 || rest[0] != '"' {
		return "", false
	}
	end := 1
	for end < len(rest) && rest[end] != '"' {
		if rest[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(rest) {
		return "", false
	}
	var s string
	if json.Unmarshal(rest[:end+1], &s) != nil {
		return "", false
	}
	return s, true
}

func agentName(a string) string {
	if a == "" {
		return "the runtime"
	}
	return a
}

// stepWriter passes the run's progress lines on, and tells the gate of each
// step ("[agent] turn N tool …", one per tool result, written by the
// agent's own goroutine after the result is recorded).
type stepWriter struct {
	gate  *orderGate
	next  io.Writer // nil for none
	notes func(string)
}

func (w stepWriter) Write(p []byte) (int, error) {
	if agent, ok := stepAgent(p); ok {
		if note := w.gate.step(agent); note != "" {
			w.notes(note)
		}
	}
	if w.next == nil {
		return len(p), nil
	}
	return w.next.Write(p)
}

// stepAgent reads the agent of a progress step line.
func stepAgent(p []byte) (string, bool) {
	if len(p) == 0 || p[0] != '[' {
		return "", false
	}
	i := bytes.Index(p, []byte("] turn "))
	if i < 0 {
		return "", false
	}
	return string(p[1:i]), true
}
