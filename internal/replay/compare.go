package replay

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Kinds of divergence.
const (
	KindInitialState = "initial_state" // an input is missing or changed: nothing was replayed
	KindToolCall     = "tool_call"     // a call's name or arguments differ, or it is missing or extra
	KindObservation  = "observation"   // a tool result's output (normalized), error flag or metadata differ
	KindFile         = "file"          // a file change's path or resulting content differ
	KindFinalFiles   = "final_files"   // the files in /workspace and /outputs at the end differ
	KindTurns        = "turns"         // an agent asked for more or fewer model turns than recorded
	KindModel        = "model"         // a runtime model call (summary, verdict) the record has no answer for
)

// Divergence is the first place where a replay did not do what the record
// says.
type Divergence struct {
	Kind string `json:"kind"`
	// Seq is the event of the original record where it happened; After
	// means just after it (something the original did not do).
	Seq      int64  `json:"seq"`
	After    bool   `json:"after,omitempty"`
	Agent    string `json:"agent,omitempty"`
	What     string `json:"what"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
}

func (d Divergence) pos() int64 {
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

// Normalization rules: what an observation may differ by between a run and
// its replay without being a divergence. Everything else is compared
// exactly.
//
//  1. The run directory: the original's and the replay's (as given and with
//     links resolved) both read <RUN>.
//  2. RFC 3339 timestamps (2026-01-02T15:04:05.999Z, with or without
//     fraction and zone) read <TIME>.
//  3. "took 12ms"-style durations read "took <DUR>".
//  4. Random temporary names: the publication plane's staging directories
//     (outputs-<digits>), the runtime's atomic-write temporaries
//     (.apodex-<suffix>, .apodex-merge-<hex>) and blob temporaries
//     (.tmp-<digits>) read with <TMP> for the random part.
//  5. Tool metadata: duration_ms is dropped (and the tool_result's own
//     duration_ms is not compared); string values follow rules 1-4.
//  6. The lead's notices of its subagents' ends are compared as one ordered
//     stream, whichever wait result or turn-start observation carried them
//     (see notices.go).
var (
	rfc3339   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?`)
	tookDur   = regexp.MustCompile(`\btook \d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|m|h)\b`)
	stageName = regexp.MustCompile(`\boutputs-\d+`)
	tempName  = regexp.MustCompile(`\.apodex-(?:merge-)?[0-9A-Za-z]+`)
	blobTemp  = regexp.MustCompile(`\.tmp-\d+`)
)

// normalizer applies the rules for one side of the comparison.
type normalizer struct{ dirs []string }

func newNormalizer(dir string) normalizer {
	n := normalizer{dirs: []string{dir}}
	if r, err := filepath.EvalSymlinks(dir); err == nil && r != dir {
		n.dirs = append(n.dirs, r)
	}
	return n
}

func (n normalizer) text(s string) string {
	for _, d := range n.dirs {
		s = strings.ReplaceAll(s, d, "<RUN>")
	}
	s = rfc3339.ReplaceAllString(s, "<TIME>")
	s = tookDur.ReplaceAllString(s, "took <DUR>")
	s = stageName.ReplaceAllString(s, "outputs-<TMP>")
	s = tempName.ReplaceAllString(s, ".apodex-<TMP>")
	return blobTemp.ReplaceAllString(s, ".tmp-<TMP>")
}

// meta is a tool result's metadata without its duration, texts normalized.
func (n normalizer) meta(m *record.ToolMeta) record.ToolMeta {
	if m == nil {
		return record.ToolMeta{}
	}
	out := *m
	out.DurationMS = 0
	out.SnapshotError = n.text(out.SnapshotError)
	return out
}

// side is one record being compared: its directory and events by stream.
type side struct {
	dir     string
	norm    normalizer
	streams map[orderKey][]record.Event
	final   []record.FileEntry
	seqEnd  int64    // run_finished's seq
	notices []notice // what the lead was told of its subagents' ends
}

func newSide(dir string, events []record.Event) side {
	s := side{dir: dir, norm: newNormalizer(dir), streams: map[orderKey][]record.Event{}, notices: leadNotices(dir, events)}
	for _, e := range events {
		switch e.Type {
		case record.TypeToolCall, record.TypeToolResult, record.TypeFileDelta:
			k := orderKey{e.Agent, e.Type}
			s.streams[k] = append(s.streams[k], e)
		case record.TypeRunFinished:
			var rf record.RunFinished
			if e.Decode(&rf) == nil {
				s.final, s.seqEnd = rf.Files, e.Seq
			}
		}
	}
	return s
}

// compare walks the original in seq order and returns the first divergence
// of the replay from it, with what was compared.
func compare(orig []record.Event, o, r side) (*Divergence, Compared) {
	var cnt Compared
	var first *Divergence
	idx := map[orderKey]int{}
	for _, e := range orig {
		if !isCompared(e.Type) {
			continue
		}
		k := orderKey{e.Agent, e.Type}
		i := idx[k]
		idx[k] = i + 1
		var got *record.Event
		if rs := r.streams[k]; i < len(rs) {
			got = &rs[i]
		}
		d := compareEvent(e, got, i, o, r, &cnt)
		if d != nil {
			first = d
			break
		}
	}
	// Events the replay made and the original did not: each sits just after
	// its stream's last original event.
	for k, rs := range r.streams {
		n := len(o.streams[k])
		if len(rs) <= n {
			continue
		}
		var after int64
		if n > 0 {
			after = o.streams[k][n-1].Seq
		}
		d := &Divergence{Kind: kindOf(k.typ), Seq: after, After: true, Agent: k.agent,
			What: fmt.Sprintf("%s %d of %s", k.typ, n+1, agentName(k.agent)), Expected: "none", Got: describe(rs[n], r.norm)}
		if first == nil || d.pos() < first.pos() {
			first = d
		}
	}
	for _, d := range []*Divergence{compareNotices(o, r), compareFinal(o, r, &cnt)} {
		if d != nil && (first == nil || d.pos() < first.pos()) {
			first = d
		}
	}
	return first, cnt
}

func isCompared(typ string) bool {
	return typ == record.TypeToolCall || typ == record.TypeToolResult || typ == record.TypeFileDelta
}

func kindOf(typ string) string {
	switch typ {
	case record.TypeToolCall:
		return KindToolCall
	case record.TypeToolResult:
		return KindObservation
	}
	return KindFile
}

func compareEvent(e record.Event, got *record.Event, i int, o, r side, cnt *Compared) *Divergence {
	d := &Divergence{Kind: kindOf(e.Type), Seq: e.Seq, Agent: e.Agent, What: fmt.Sprintf("%s %d of %s", e.Type, i+1, agentName(e.Agent))}
	d.Expected = describe(e, o.norm)
	if got == nil {
		d.Got = "none: the replay made no such event"
		return d
	}
	switch e.Type {
	case record.TypeToolCall:
		cnt.ToolCalls++
		var a, b record.ToolCall
		e.Decode(&a)
		got.Decode(&b)
		if a.Name == b.Name && a.Arguments == b.Arguments {
			return nil
		}
	case record.TypeToolResult:
		cnt.Observations++
		var a, b record.ToolResult
		e.Decode(&a)
		got.Decode(&b)
		if exp, gt, differ := resultDiff(e.Agent, a, b, o, r); differ {
			d.Expected, d.Got = exp, gt
			return d
		}
		return nil
	case record.TypeFileDelta:
		cnt.FileChanges++
		var a, b record.FileDelta
		e.Decode(&a)
		got.Decode(&b)
		if a.Path == b.Path && a.After == b.After {
			return nil
		}
	}
	d.Got = describe(*got, r.norm)
	return d
}

// resultDiff compares two tool results under the normalization rules and,
// when they differ, says how.
func resultDiff(agent string, a, b record.ToolResult, o, r side) (exp, got string, differ bool) {
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
	if x, y := o.norm.text(a.Output), r.norm.text(b.Output); x != y {
		ex, gy := firstDifference(x, y)
		return head + ex, gy, true
	}
	if x, y := o.norm.meta(a.Meta), r.norm.meta(b.Meta); !reflect.DeepEqual(x, y) {
		xj, _ := json.Marshal(x)
		yj, _ := json.Marshal(y)
		return head + "meta " + string(xj), "meta " + string(yj), true
	}
	if a.FullRef != "" || b.FullRef != "" {
		x, y := fullBody(o, a.FullRef), fullBody(r, b.FullRef)
		if x != y {
			ex, gy := firstDifference(x, y)
			return head + "full output: " + ex, "full output: " + gy, true
		}
	}
	return "", "", false
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
func describe(e record.Event, n normalizer) string {
	switch e.Type {
	case record.TypeToolCall:
		var c record.ToolCall
		e.Decode(&c)
		return fmt.Sprintf("%s %s", c.Name, clip(c.Arguments, 200))
	case record.TypeToolResult:
		var t record.ToolResult
		e.Decode(&t)
		return fmt.Sprintf("%s result (is_error %v): %q", t.Name, t.IsError, clip(n.text(t.Output), 200))
	case record.TypeFileDelta:
		var f record.FileDelta
		e.Decode(&f)
		after := f.After
		if after == "" {
			after = "deleted"
		}
		return fmt.Sprintf("%s → %s", f.Path, after)
	}
	return e.Type
}

// compareFinal compares the files in /workspace and /outputs at the end.
func compareFinal(o, r side, cnt *Compared) *Divergence {
	want, got := map[string]string{}, map[string]string{}
	var paths []string
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
		if w == g {
			continue
		}
		return &Divergence{Kind: KindFinalFiles, Seq: o.seqEnd, What: "final file " + p,
			Expected: orNone(w, "no such file"), Got: orNone(g, "no such file")}
	}
	return nil
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
