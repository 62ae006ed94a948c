package divergence

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// A subagent's end reaches the lead as a notice, collected by the first of
// the lead's collections after it: a wait call (which returns every notice
// pending when it wakes) or the start of the lead's next turn (an
// "assignments" observation). Which collection gets which notices, and
// whether two ends that come close together are told in one wait result or
// in two, depends on how the processes were scheduled, not on anything a
// recorded output decides; the replay keeps the order of the ends (see
// orderGate) but cannot pin the grouping. So the lead's notices are
// compared as one ordered stream (normalization rule 6): each notice
// exactly, in the same order, whichever collection carried it. A wait
// result that carries notices, or says there is nothing left to wait for,
// is compared by that stream only; any other wait result (a timeout, a
// user message, an error) is compared exactly.

// notice is one subagent end as the lead was told of it.
type notice struct {
	seq  int64 // the wait result or observation that carried it
	text string
}

const nothingToWait = "nothing to wait for:"

// noticeStart finds where each notice of a collection begins.
var noticeStart = regexp.MustCompile(`(?:^|\n\n)Assignment [A-Za-z0-9_-]+ \(`)

// splitNotices splits a collection into its notices; ok is false when the
// text is not a collection of notices.
func splitNotices(text string) (ns []string, ok bool) {
	idx := noticeStart.FindAllStringIndex(text, -1)
	if len(idx) == 0 || idx[0][0] != 0 {
		return nil, false
	}
	for i, at := range idx {
		start := at[0]
		if i > 0 {
			start += 2 // the "\n\n" between notices
		}
		end := len(text)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		ns = append(ns, text[start:end])
	}
	return ns, true
}

// leadWait reports whether a tool result is one of the lead's wait results
// the notice stream covers.
func leadWait(agent string, tr record.ToolResult) bool {
	if agent != "lead" || tr.Name != "wait" || tr.IsError {
		return false
	}
	_, isNotices := splitNotices(tr.Output)
	return isNotices || strings.HasPrefix(tr.Output, nothingToWait)
}

// leadNotices is the stream of notices the lead was told, in order.
func leadNotices(dir string, events []item) []notice {
	var out []notice
	for _, e := range events {
		if e.Agent != "lead" {
			continue
		}
		var text string
		switch p := e.p.(type) {
		case *record.ToolResult:
			tr := p
			if !leadWait(e.Agent, *tr) {
				continue
			}
			text = tr.Output
			if tr.FullRef != "" { // the notices the model was shown were cut: take them whole
				if b, err := record.ReadBlob(dir, tr.FullRef); err == nil {
					text = string(b)
				}
			}
		case *record.Observation:
			if p.Kind != "assignments" {
				continue
			}
			text = p.Text
		default:
			continue
		}
		ns, _ := splitNotices(text)
		for _, n := range ns {
			out = append(out, notice{seq: e.Seq, text: n})
		}
	}
	return out
}

// compareNotices returns the differences between the lead's notice
// streams, each placed at the original's collection that carried it: a
// notice the replay did not tell, one it told and the original did not
// (aligned by a longest common subsequence, so one missing notice is one
// divergence), and a notice told in place of another.
func compareNotices(o, r side) []Divergence {
	x := make([]string, len(o.notices))
	for i, n := range o.notices {
		x[i] = o.norm.text(n.text)
	}
	y := make([]string, len(r.notices))
	for i, n := range r.notices {
		y[i] = r.norm.text(n.text)
	}
	var out []Divergence
	i, j := 0, 0
	lcs := lcsTable(x, y)
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
			continue
		case i < len(x) && j < len(y) && lcs[i+1][j+1] == lcs[i][j]: // neither is kept: one told in place of the other
			ex, gy := firstDifference(x[i], y[j])
			out = append(out, Divergence{Class: ClassPolicy, Kind: KindObservation, Agent: "lead", Seq: o.notices[i].seq,
				What: fmt.Sprintf("notice %d to the lead", i+1), Expected: ex, Got: gy})
			i, j = i+1, j+1
		case j >= len(y) || i < len(x) && lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, Divergence{Class: ClassPolicy, Kind: KindObservation, Agent: "lead", Seq: o.notices[i].seq,
				What: fmt.Sprintf("notice %d to the lead", i+1), Expected: clip(x[i], 200), Got: "none: the lead was not told"})
			i++
		default: // told in the replay only: just after the original's notice before it
			d := Divergence{Class: ClassPolicy, Kind: KindObservation, Agent: "lead", After: true,
				What: fmt.Sprintf("notice %d to the lead", j+1), Expected: "none", Got: clip(y[j], 200)}
			switch {
			case i > 0:
				d.Seq = o.notices[i-1].seq
			case len(o.notices) > 0:
				d.Seq, d.After = o.notices[0].seq, false
			}
			out = append(out, d)
			j++
		}
	}
	return out
}

// lcsTable is t[i][j] = the length of the longest common subsequence of
// a[i:] and b[j:].
func lcsTable(a, b []string) [][]int {
	t := make([][]int, len(a)+1)
	for i := range t {
		t[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	return t
}
