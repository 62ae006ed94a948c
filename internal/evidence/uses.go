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

// Uses finds where each id was cited: in report claims and verify calls on
// the record, and in [E12] markers of the files under outputs (a host
// directory, seen as /outputs; "" for none).
func Uses(events []record.Event, outputs string) map[string][]Use {
	out := map[string][]Use{}
	add := func(ref string, u Use) {
		if ref = strings.TrimSpace(ref); IsID(ref) && !slices.Contains(out[ref], u) {
			out[ref] = append(out[ref], u)
		}
	}
	for _, e := range events {
		switch e.Type {
		case record.TypeReport: // a subagent's report (package team)
			var r struct {
				Assignment string `json:"assignment"`
				Claims     []struct {
					Evidence []string `json:"evidence"`
				} `json:"claims"`
			}
			if e.Decode(&r) == nil {
				for i, c := range r.Claims {
					for _, ref := range c.Evidence {
						add(ref, Use{Where: fmt.Sprintf("report %s claim %d", r.Assignment, i+1), Agent: e.Agent})
					}
				}
			}
		case record.TypeToolCall:
			var tc record.ToolCall
			if e.Decode(&tc) != nil || (tc.Name != "verify" && tc.Name != "board_resolve") {
				continue
			}
			var a struct {
				Evidence []string `json:"evidence"`
				Refs     []string `json:"refs"`
			}
			if json.Unmarshal([]byte(tc.Arguments), &a) == nil {
				for _, ref := range append(a.Evidence, a.Refs...) {
					add(ref, Use{Where: tc.Name + " call " + tc.CallID, Agent: e.Agent})
				}
			}
		}
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
		for _, c := range Citations(string(data)) {
			for _, id := range c.IDs {
				add(id, Use{Where: fmt.Sprintf("%s:%d", plane, c.Line)})
			}
		}
		return nil
	})
	return out
}
