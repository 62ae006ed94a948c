package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
	"github.com/apodex/apodex/internal/workspace"
)

// Revise, never start over (issue 26 item 5). What the lead wrote and a
// verifier settled is the work synthesis must keep: a line of an existing
// report's statement that cites only verified claims ([K3] where K3 is
// corroborated and settled: supported by a verifier on its own evidence)
// is kept, with its citations, verbatim (spacing aside). The writer may
// add to it, move it, and redo everything else — statements citing
// refuted, disputed or unresolved claims, or none — but a write_file or
// edit_file that would leave a report without one of its kept statements
// is refused before it changes anything, naming them.

// keptLine is one statement of an existing report a revision must keep.
type keptLine struct {
	line   int    // in the report as it was
	text   string // as written: from its sentence's start to its citation
	claims []string
}

// sentenceEnd matches the end of a sentence: ., ! or ? and a blank.
var sentenceEnd = regexp.MustCompile(`[.!?]\s`)

// keptLines are, per report, its statements that cite only verified
// claims: each [K…] citation with the text of its sentence before it
// ("The total is 42 [K1]" of "The total is 42 [K1]. Draft."), when every
// claim the statement cites is verified; a statement inside a longer kept
// one of the same line is left to it.
func keptLines(l *claims.Ledger, existing map[string]string) map[string][]keptLine {
	out := map[string][]keptLine{}
	for path, text := range existing {
		for i, line := range strings.Split(text, "\n") {
			var kept []keptLine
			for _, m := range citeRef.FindAllStringSubmatchIndex(line, -1) {
				start := 0
				for _, e := range sentenceEnd.FindAllStringIndex(line[:m[0]], -1) {
					start = e[1]
				}
				stmt := line[start:m[1]]
				var ids []string
				for _, sm := range citeRef.FindAllStringSubmatch(stmt, -1) {
					for _, id := range strings.FieldsFunc(sm[1], func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
						if id[0] == 'K' && !slices.Contains(ids, id) {
							ids = append(ids, id)
						}
					}
				}
				verified := len(ids) > 0
				for _, id := range ids {
					c, ok := l.Get(id)
					verified = verified && ok && c.Withdrawn == "" && c.Settled && c.Status == claims.Corroborated
				}
				if !verified {
					continue
				}
				k := keptLine{line: i + 1, text: strings.TrimSpace(stmt), claims: ids}
				kept = slices.DeleteFunc(kept, func(o keptLine) bool { return strings.HasPrefix(k.text, o.text) })
				kept = append(kept, k)
			}
			out[path] = append(out[path], kept...)
		}
		if len(out[path]) == 0 {
			delete(out, path)
		}
	}
	return out
}

// spaced is s with every run of white space one blank.
func spaced(s string) string { return strings.Join(strings.Fields(s), " ") }

// dropped are the kept lines content no longer holds (spacing aside).
func dropped(kept []keptLine, content string) []keptLine {
	have := spaced(content)
	var out []keptLine
	for _, k := range kept {
		if !strings.Contains(have, spaced(k.text)) {
			out = append(out, k)
		}
	}
	return out
}

// keepGuard wraps the writer's write_file or edit_file: a write to a
// report that would drop one of its kept lines is refused.
type keepGuard struct {
	tool.Tool
	fs   *workspace.FS
	kept map[string][]keptLine // by plane path
}

// guardRevisions wraps the tools of set that write files.
func guardRevisions(tools []tool.Tool, fs *workspace.FS, kept map[string][]keptLine) []tool.Tool {
	if len(kept) == 0 {
		return tools
	}
	out := make([]tool.Tool, len(tools))
	for i, tl := range tools {
		switch tl.Spec().Name {
		case "write_file", "edit_file":
			out[i] = keepGuard{tl, fs, kept}
		default:
			out[i] = tl
		}
	}
	return out
}

// Offered and Serial are the wrapped tool's.
func (g keepGuard) Offered() bool { return tool.IsOffered(g.Tool) }
func (g keepGuard) Serial() bool  { return tool.IsSerial(g.Tool) }

func (g keepGuard) Call(ctx context.Context, args json.RawMessage) tool.Result {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		OldText string  `json:"old_text"`
		NewText string  `json:"new_text"`
	}
	if json.Unmarshal(args, &a) != nil {
		return g.Tool.Call(ctx, args) // the tool says what is wrong
	}
	p, err := g.fs.Resolve(a.Path)
	if err != nil {
		return g.Tool.Call(ctx, args)
	}
	kept := g.kept[p.PlanePath]
	if len(kept) == 0 {
		return g.Tool.Call(ctx, args)
	}
	var next string
	switch {
	case a.Content != nil: // write_file
		next = *a.Content
	default: // edit_file: what the file would hold (when old_text matches once)
		cur, ok := readPlane(g.fs, p.PlanePath)
		if !ok || a.OldText == "" || strings.Count(string(cur), a.OldText) != 1 {
			return g.Tool.Call(ctx, args)
		}
		next = strings.Replace(string(cur), a.OldText, a.NewText, 1)
	}
	lost := dropped(kept, next)
	if len(lost) == 0 {
		return g.Tool.Call(ctx, args)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "refused, nothing was changed: this revision of %s would drop or rewrite %d verified statement(s) of the report as it was. A statement citing only verified claims keeps its words and its citations; revise around it, and redo only what is refuted, disputed, unresolved or uncited. Keep verbatim:", p.PlanePath, len(lost))
	for _, k := range lost {
		fmt.Fprintf(&b, "\n- line %d (%s): %s", k.line, strings.Join(k.claims, ", "), claim.ClipBytes(k.text, 400))
	}
	return tool.Errorf("%s", b.String())
}
