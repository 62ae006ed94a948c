package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/evidence"
)

type q map[string]string

func (m q) Text(id string) (string, error) {
	if s, ok := m[id]; ok {
		return s, nil
	}
	return "", fmt.Errorf("%w %s", evidence.ErrUnknown, id)
}

func TestSourceAlignment(t *testing.T) {
	out := t.TempDir()
	ev := q{"E1": "The lamp was first lit on 14 March 1871 by keeper Elias Marrow."}
	clause := contract.Clause{Kind: contract.KindSourceAlignment, Outputs: []string{"/outputs/answer.md"}, MinCitations: 1}
	for _, c := range []struct {
		name, doc string
		min       int
		pass      bool
		want      []string
	}{
		{"matching quote", "# A\n\nIt was \"first lit on 14 March 1871\" [E1].\n", 1, true, []string{"1 citation(s) with 1 quote(s)"}},
		{"misquote", "# A\n\nIt was \"first lit on 15 March 1871\" [E1].\n", 1, false, []string{"/outputs/answer.md:3", `"first lit on 15 March 1871"`, "E1"}},
		{"unknown id", "# A\n\nIt was lit [E12].\n", 1, false, []string{"/outputs/answer.md:3", "E12", "not in the run's evidence"}},
		{"too few", "# A\n\nNo citations.\n", 1, false, []string{`rule "at least 1 citations" failed: /outputs/answer.md carry 0`}},
		{"none required", "# A\n\nNo citations.\n", 0, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(out, "answer.md"), []byte(c.doc), 0o644)
			cl := clause
			cl.MinCitations = c.min
			r := Run(t.Context(), Env{Outputs: out, Evidence: ev}, cl) // no Runner: alignment needs no sandbox
			if r.Passed != c.pass {
				t.Fatalf("passed %v: %s", r.Passed, r.Detail)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Detail, w) {
					t.Errorf("detail %q lacks %q", r.Detail, w)
				}
			}
		})
	}
	os.Remove(filepath.Join(out, "answer.md"))
	os.Symlink("/etc/passwd", filepath.Join(out, "answer.md"))
	if r := Run(t.Context(), Env{Outputs: out, Evidence: ev}, clause); r.Passed || !strings.Contains(r.Detail, "not a regular file") {
		t.Fatalf("a symlinked deliverable: %+v", r)
	}
	if !NeedsSandbox([]contract.Clause{clause, {Kind: contract.KindTests}}) || NeedsSandbox([]contract.Clause{clause}) {
		t.Fatal("NeedsSandbox wrong")
	}
}
