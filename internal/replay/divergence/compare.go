// Package divergence compares a run's record with its replay's record
// (package replay makes the replay) and says where and why they differ.
//
// Guarantees:
//   - every tool call, tool result and file change of the original is
//     paired with the replay's by agent, tool call id (a replay hands out
//     the recorded replies, so the ids are the recorded ones), path and
//     order, and compared under the normalization rules (norm.go); the
//     comparison goes to the end: one missing call is one divergence;
//   - the lead's notices are compared as one ordered stream, aligned
//     (notices.go); the final files path by path;
//   - every divergence has a class: nondeterministic_output (only what
//     cannot repeat differs; not counted against identity), environment
//     or policy; Find returns them in the original's seq order.
package divergence

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Kinds of divergence: what differs.
const (
	KindInitialState = "initial_state" // an input is missing or changed: nothing was replayed
	KindToolCall     = "tool_call"     // a call's name or arguments differ, or it is missing or extra
	KindObservation  = "observation"   // a tool result's output (normalized), error flag or metadata differ
	KindFile         = "file"          // a file change's path or resulting content differ
	KindFinalFiles   = "final_files"   // the files in /workspace and /outputs at the end differ
	KindTurns        = "turns"         // an agent asked for more or fewer model turns than recorded
	KindModel        = "model"         // a runtime model call (summary, verdict) the record has no answer for
)

// Classes of divergence: why it differs.
const (
	// ClassNoise: only what a command prints that cannot repeat differs
	// (file times, inode numbers, clock times, line order: rules 8-11).
	// The replay is still identical.
	ClassNoise = "nondeterministic_output"
	// ClassEnvironment: the host answered differently to the same call — a
	// command's output or exit, a file it wrote, a page, the inputs.
	ClassEnvironment = "environment"
	// ClassPolicy: the model's part or the runtime's decisions differ — a
	// call made or not, its arguments, the turns an agent asked for, what a
	// coordination tool (board, dispatch, wait, verify…) answered, what the
	// lead was told.
	ClassPolicy = "policy"
)

// environmentTools are the tools whose results come from the host (files,
// commands, the corpus, the network); any other tool's result is the
// runtime's (coordination, the lease, recall).
var environmentTools = map[string]bool{"bash": true, "read_file": true, "write_file": true, "edit_file": true,
	"list_files": true, "grep": true, "search": true, "fetch": true}

// Divergence is one place where a replay did not do what the record says.
type Divergence struct {
	Class string `json:"class"`
	Kind  string `json:"kind"`
	// Seq is the event of the original record where it happened; After
	// means just after it (something the original did not do).
	Seq      int64  `json:"seq"`
	After    bool   `json:"after,omitempty"`
	Agent    string `json:"agent,omitempty"`
	What     string `json:"what"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
}

// Pos orders divergences by where they happened in the original.
func (d Divergence) Pos() int64 {
	p := 2 * d.Seq
	if d.After {
		p++
	}
	return p
}

// Compared counts what a replay checked.
type Compared struct {
	ToolCalls    int `json:"tool_calls"`
	Observations int `json:"observations"`
	FileChanges  int `json:"file_changes"`
	FinalFiles   int `json:"final_files"`
}

// eventKey pairs an original event with the replay's: the same agent,
// type and tool call (a replay hands out the recorded replies, so the call
// ids are the recorded ones), the same path for a file change, and the
// n-th such event. Events without a call id pair by their order.
type eventKey struct {
	agent, typ, call, path string
	n                      int
}

// item is one event with its payload, decoded once (nil when it does not
// decode); the compared ones carry a *record.ToolCall, *record.ToolResult
// or *record.FileDelta.
type item struct {
	record.Event
	p any
}

// payload is p as a T, or T's zero value when p is not a *T.
func payload[T any](p any) T {
	if v, ok := p.(*T); ok {
		return *v
	}
	var zero T
	return zero
}

// streamKey is an agent's events of one type.
type streamKey struct{ agent, typ string }

// side is one record being compared: its directory and events by key.
type side struct {
	dir     string
	norm    normalizer
	events  map[eventKey]item
	keys    []eventKey // in record order
	streams map[streamKey][]int64
	calls   map[[2]string]int64 // (agent, call id) -> seq of its tool_call
	final   []record.FileEntry
	world   int      // run_finished's world_files: the world's files left unchanged, not in final
	seqEnd  int64    // run_finished's seq
	notices []notice // what the lead was told of its subagents' ends
}

func newSide(dir string, events []record.Event) side {
	s := side{dir: dir, norm: newNormalizer(dir), events: map[eventKey]item{}, streams: map[streamKey][]int64{},
		calls: map[[2]string]int64{}}
	items := make([]item, len(events))
	for i, e := range events {
		items[i].Event = e
		items[i].p, _ = record.DecodePayload(e) // nil when it does not decode
	}
	s.notices = leadNotices(dir, items)
	seen := map[eventKey]int{}
	for _, it := range items {
		e, p := it.Event, it.p
		k := eventKey{agent: e.Agent, typ: e.Type}
		switch p := p.(type) {
		case *record.ToolCall:
			k.call = p.CallID
			if p.CallID != "" {
				s.calls[[2]string{e.Agent, p.CallID}] = e.Seq
			}
		case *record.ToolResult:
			k.call = p.CallID
		case *record.FileDelta:
			k.call, k.path = p.CallID, p.Path
		case *record.RunFinished:
			s.final, s.world, s.seqEnd = p.Files, p.WorldFiles, e.Seq
			continue
		default:
			continue
		}
		k.n = seen[k] // the n-th event of this key (n is 0 in the lookup)
		seen[eventKey{agent: k.agent, typ: k.typ, call: k.call, path: k.path}]++
		s.events[k] = it
		s.keys = append(s.keys, k)
		sk := streamKey{e.Agent, e.Type}
		s.streams[sk] = append(s.streams[sk], e.Seq)
	}
	return s
}

// Find compares the original record (the events of origDir) with the
// replay's (of replayDir) and returns every divergence, in the original's
// seq order, with what was compared.
func Find(orig []record.Event, origDir string, replayed []record.Event, replayDir string) ([]Divergence, Compared) {
	return compare(orig, newSide(origDir, orig), newSide(replayDir, replayed))
}

// compare walks the original in seq order and returns every divergence of
// the replay from it, in the original's seq order, with what was compared.
func compare(orig []record.Event, o, r side) ([]Divergence, Compared) {
	var cnt Compared
	var out []Divergence
	for _, k := range o.keys {
		var got *item
		if e, ok := r.events[k]; ok {
			got = &e
		}
		if d := compareEvent(o.events[k], got, k, o, r, &cnt); d != nil {
			out = append(out, *d)
		}
	}
	// Events the replay made and the original did not: each sits just after
	// its call in the original, or else after its stream's last original
	// event.
	for _, k := range r.keys {
		if _, ok := o.events[k]; ok {
			continue
		}
		e := r.events[k]
		after, ok := o.calls[[2]string{k.agent, k.call}]
		if !ok {
			if seqs := o.streams[streamKey{k.agent, k.typ}]; len(seqs) > 0 {
				after = seqs[len(seqs)-1]
			}
		}
		out = append(out, Divergence{Class: classOf(e.p), Kind: kindOf(e.p), Seq: after, After: true, Agent: k.agent,
			What: fmt.Sprintf("%s %s of %s", k.typ, callName(k), agentName(k.agent)), Expected: "none", Got: describe(e, r.norm)})
	}
	out = append(out, compareNotices(o, r)...)
	out = append(out, compareFinal(o, r, &cnt)...)
	Sort(out)
	return out, cnt
}

// Sort orders divergences by where they happened in the original (Pos).
func Sort(ds []Divergence) {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Pos() < ds[j].Pos() })
}

func agentName(a string) string {
	if a == "" {
		return "the runtime"
	}
	return a
}

func callName(k eventKey) string {
	if k.call == "" {
		return fmt.Sprintf("%d", k.n+1)
	}
	s := k.call
	if k.path != "" {
		s += " " + k.path
	}
	if k.n > 0 {
		s += fmt.Sprintf(" (#%d)", k.n+1)
	}
	return s
}

// kindOf is the kind of a divergence in a compared event of payload p.
func kindOf(p any) string {
	switch p.(type) {
	case *record.ToolCall:
		return KindToolCall
	case *record.ToolResult:
		return KindObservation
	}
	return KindFile
}

// classOf is the class of an event one side has and the other has not: a
// file change is the host's (the same call wrote another file); a call or
// result is the policy's (what ran differs).
func classOf(p any) string {
	if _, ok := p.(*record.FileDelta); ok {
		return ClassEnvironment
	}
	return ClassPolicy
}

func compareEvent(e item, got *item, k eventKey, o, r side, cnt *Compared) *Divergence {
	d := &Divergence{Class: classOf(e.p), Kind: kindOf(e.p), Seq: e.Seq, Agent: e.Agent, What: fmt.Sprintf("%s %s of %s", e.Type, callName(k), agentName(e.Agent))}
	d.Expected = describe(e, o.norm)
	if got == nil {
		d.Got = "none: the replay made no such event"
		return d
	}
	switch e.p.(type) {
	case *record.ToolCall:
		cnt.ToolCalls++
		a, b := payload[record.ToolCall](e.p), payload[record.ToolCall](got.p)
		if a.Name == b.Name && a.Arguments == b.Arguments {
			return nil
		}
	case *record.ToolResult:
		cnt.Observations++
		a, b := payload[record.ToolResult](e.p), payload[record.ToolResult](got.p)
		exp, gt, differ := resultDiff(e.Agent, a, b, o, r, false)
		if !differ {
			return nil
		}
		d.Expected, d.Got = exp, gt
		if _, _, still := resultDiff(e.Agent, a, b, o, r, true); !still {
			d.Class = ClassNoise
			_, rules := resultNoise(a, b, o, r)
			d.What += ": only " + strings.Join(rules, ", ")
		} else if environmentTools[a.Name] {
			d.Class = ClassEnvironment
		}
		return d
	case *record.FileDelta:
		cnt.FileChanges++
		a, b := payload[record.FileDelta](e.p), payload[record.FileDelta](got.p)
		if a.Path == b.Path && a.After == b.After {
			return nil
		}
		d.Class = ClassEnvironment
	}
	d.Got = describe(*got, r.norm)
	return d
}

// resultDiff compares two tool results under the normalization rules (with
// noise, the nondeterministic-output ones too) and, when they differ, says
// how.
func resultDiff(agent string, a, b record.ToolResult, o, r side, noise bool) (exp, got string, differ bool) {
	head := a.Name + " " + a.CallID + ": "
	if a.Name != b.Name {
		return head + "tool " + a.Name, "tool " + b.Name, true
	}
	if a.IsError != b.IsError {
		return head + fmt.Sprintf("is_error %v", a.IsError), fmt.Sprintf("is_error %v", b.IsError), true
	}
	if leadWait(agent, a) && leadWait(agent, b) {
		return "", "", false // compared as the lead's notice stream (rule 6)
	}
	if x, ok := fetchedURL(a); ok {
		if y, ok := fetchedURL(b); ok { // rule 7
			if x != y {
				return head + "evidence " + x, "evidence " + y, true
			}
			return "", "", false
		}
	}
	if x, y := o.norm.text(a.Output), r.norm.text(b.Output); x != y {
		if same, _ := noiseEqual(x, y); !noise || !same {
			ex, gy := firstDifference(x, y)
			return head + ex, gy, true
		}
	}
	if x, y := o.norm.meta(a.Meta), r.norm.meta(b.Meta); !reflect.DeepEqual(x, y) {
		if noise { // rule 10
			x.StdoutBytes, x.StderrBytes, y.StdoutBytes, y.StderrBytes = 0, 0, 0, 0
		}
		if !reflect.DeepEqual(x, y) {
			xj, _ := json.Marshal(x)
			yj, _ := json.Marshal(y)
			return head + "meta " + string(xj), "meta " + string(yj), true
		}
	}
	if a.FullRef != "" || b.FullRef != "" {
		x, y := fullBody(o, a.FullRef), fullBody(r, b.FullRef)
		if x != y {
			if same, _ := noiseEqual(x, y); !noise || !same {
				ex, gy := firstDifference(x, y)
				return head + "full output: " + ex, "full output: " + gy, true
			}
		}
	}
	return "", "", false
}

// resultNoise names the nondeterministic-output rules two results needed.
func resultNoise(a, b record.ToolResult, o, r side) (bool, []string) {
	rules := []string{}
	add := func(rs []string) {
		for _, x := range rs {
			if !slices.Contains(rules, x) {
				rules = append(rules, x)
			}
		}
	}
	if x, y := o.norm.text(a.Output), r.norm.text(b.Output); x != y {
		_, rs := noiseEqual(x, y)
		add(rs)
	}
	if a.FullRef != "" || b.FullRef != "" {
		if x, y := fullBody(o, a.FullRef), fullBody(r, b.FullRef); x != y {
			_, rs := noiseEqual(x, y)
			add(rs)
		}
	}
	if len(rules) == 0 {
		rules = append(rules, "output sizes")
	}
	return true, rules
}

// fullBody is a result's whole output from its blob, normalized.
func fullBody(s side, ref string) string {
	if ref == "" {
		return "(no full output kept)"
	}
	b, err := record.ReadBlob(s.dir, ref)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return s.norm.text(string(b))
}

// firstDifference shows two texts whole when short, else from the first
// line where they differ.
func firstDifference(a, b string) (string, string) {
	if len(a) <= 300 && len(b) <= 300 {
		return fmt.Sprintf("%q", a), fmt.Sprintf("%q", b)
	}
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	i := 0
	for i < len(la) && i < len(lb) && la[i] == lb[i] {
		i++
	}
	return fromLine(la, i), fromLine(lb, i)
}

func fromLine(lines []string, i int) string {
	if i >= len(lines) {
		return fmt.Sprintf("ends after line %d", len(lines))
	}
	return fmt.Sprintf("from line %d: %q", i+1, clip(strings.Join(lines[i:], "\n"), 200))
}

// describe renders one compared event for a divergence report.
func describe(e item, n normalizer) string {
	switch p := e.p.(type) {
	case *record.ToolCall:
		return fmt.Sprintf("%s %s", p.Name, clip(p.Arguments, 200))
	case *record.ToolResult:
		return fmt.Sprintf("%s result (is_error %v): %q", p.Name, p.IsError, clip(n.text(p.Output), 200))
	case *record.FileDelta:
		f := p
		after := f.After
		if after == "" {
			after = "deleted"
		}
		return fmt.Sprintf("%s → %s", f.Path, after)
	}
	return e.Type
}

// compareFinal compares the files in /workspace and /outputs at the end:
// one divergence per path that differs, and for a world rollout the
// number of the world's files left unchanged (a world file removed on one
// side only). A world rollout recorded before run_finished left those
// out (world_files) listed them: its paths that the other side does not
// list are not compared, as the other side counts them unlisted.
func compareFinal(o, r side, cnt *Compared) []Divergence {
	want, got := map[string]string{}, map[string]string{}
	var paths []string
	var out []Divergence
	older := o.world == 0 && r.world > 0
	if o.world > 0 && r.world != o.world {
		out = append(out, Divergence{Class: ClassEnvironment, Kind: KindFinalFiles, Seq: o.seqEnd, What: "the world's files left unchanged",
			Expected: fmt.Sprint(o.world), Got: fmt.Sprint(r.world)})
	}
	for _, f := range o.final {
		want[f.Path] = f.SHA256
		paths = append(paths, f.Path)
	}
	for _, f := range r.final {
		got[f.Path] = f.SHA256
		if _, ok := want[f.Path]; !ok {
			paths = append(paths, f.Path)
		}
	}
	sort.Strings(paths)
	cnt.FinalFiles = len(o.final)
	for _, p := range paths {
		w, g := want[p], got[p]
		if w == g || older && g == "" {
			continue
		}
		out = append(out, Divergence{Class: ClassEnvironment, Kind: KindFinalFiles, Seq: o.seqEnd, What: "final file " + p,
			Expected: orNone(w, "no such file"), Got: orNone(g, "no such file")})
	}
	return out
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// clip shortens s to n bytes for a divergence's description.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
