package replay

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
func leadNotices(dir string, events []record.Event) []notice {
	var out []notice
	for _, e := range events {
		if e.Agent != "lead" {
			continue
		}
		var text string
		switch e.Type {
		case record.TypeToolResult:
			var tr record.ToolResult
			if e.Decode(&tr) != nil || !leadWait(e.Agent, tr) {
				continue
			}
			text = tr.Output
			if tr.FullRef != "" { // the notices the model was shown were cut: take them whole
				if b, err := record.ReadBlob(dir, tr.FullRef); err == nil {
					text = string(b)
				}
			}
		case record.TypeObservation:
			var o record.Observation
			if e.Decode(&o) != nil || o.Kind != "assignments" {
				continue
			}
			text = o.Text
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

// compareNotices returns the first difference between the lead's notice
// streams, placed at the original's collection that carried it.
func compareNotices(o, r side) *Divergence {
	for i := 0; i < max(len(o.notices), len(r.notices)); i++ {
		d := &Divergence{Kind: KindObservation, Agent: "lead", What: fmt.Sprintf("notice %d to the lead", i+1)}
		switch {
		case i >= len(r.notices):
			d.Seq, d.Expected, d.Got = o.notices[i].seq, clip(o.norm.text(o.notices[i].text), 200), "none: the lead was not told"
		case i >= len(o.notices):
			d.After, d.Expected, d.Got = true, "none", clip(r.norm.text(r.notices[i].text), 200)
			if n := len(o.notices); n > 0 {
				d.Seq = o.notices[n-1].seq
			}
		default:
			x, y := o.norm.text(o.notices[i].text), r.norm.text(r.notices[i].text)
			if x == y {
				continue
			}
			d.Seq = o.notices[i].seq
			d.Expected, d.Got = firstDifference(x, y)
		}
		return d
	}
	return nil
}
