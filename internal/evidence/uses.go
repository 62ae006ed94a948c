package evidence

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/record"
)

// Use is one place an evidence id was cited.
type Use struct {
	Where string `json:"where"` // "report A1 claim 2", "verify call c7", "/outputs/answer.md:12"
	Agent string `json:"agent,omitempty"`
}

// maxScanned bounds the size of a deliverable scanned for citations.
const maxScanned = 8 << 20

// Cited is where the record cites each evidence id so far: in report
// claims and in verify and board_resolve calls. It advances one decoded
// event at a time (Apply); runstate keeps one per run.
type Cited map[string][]Use

func (c Cited) add(ref string, u Use) {
	if ref = strings.TrimSpace(ref); IsID(ref) && !slices.Contains(c[ref], u) {
		c[ref] = append(c[ref], u)
	}
}

// Apply takes the citations of one event; p is its payload as
// record.DecodePayload returns it.
func (c Cited) Apply(e record.Event, p any) {
	switch p := p.(type) {
	case *record.Report: // a subagent's report (package team)
		for i, cl := range p.Claims {
			for _, ref := range cl.Evidence {
				c.add(ref, Use{Where: fmt.Sprintf("report %s claim %d", p.Assignment, i+1), Agent: e.Agent})
			}
		}
	case *record.ToolCall:
		if p.Name != "verify" && p.Name != "board_resolve" {
			return
		}
		var a struct {
			Evidence []string `json:"evidence"`
			Refs     []string `json:"refs"`
		}
		if json.Unmarshal([]byte(p.Arguments), &a) == nil {
			for _, ref := range append(a.Evidence, a.Refs...) {
				c.add(ref, Use{Where: p.Name + " call " + p.CallID, Agent: e.Agent})
			}
		}
	}
}

// Uses finds where each id was cited: in report claims and verify calls on
// the record, and in [E12] markers of the files under outputs (a host
// directory, seen as /outputs; "" for none).
func Uses(events []record.Event, outputs string) map[string][]Use {
	c := Cited{}
	for _, e := range events {
		if p, err := record.DecodePayload(e); err == nil {
			c.Apply(e, p)
		}
	}
	return c.With(outputs)
}

// With is c (copied) plus the [E12] markers of the files under outputs (a
// host directory, seen as /outputs; "" for none).
func (c Cited) With(outputs string) map[string][]Use {
	out := Cited{}
	for id, us := range c {
		out[id] = slices.Clone(us)
	}
	if outputs == "" {
		return out
	}
	filepath.WalkDir(outputs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > maxScanned {
			return nil
		}
		rel, _ := filepath.Rel(outputs, p)
		data, err := hostfs.ReadFile(outputs, filepath.ToSlash(rel), maxScanned) // never through a link
		if err != nil {
			return nil
		}
		plane := "/outputs/" + filepath.ToSlash(rel)
		for _, ci := range Citations(string(data)) {
			for _, id := range ci.IDs {
				out.add(id, Use{Where: fmt.Sprintf("%s:%d", plane, ci.Line)})
			}
		}
		return nil
	})
	return out
}
