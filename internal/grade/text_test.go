package grade

import (
	"strings"
	"testing"
)

func TestRenderFoldsRationale(t *testing.T) {
	var b strings.Builder
	Render(&b, &Result{Rubric: "HDS6", Total: 7, Max: 48, Items: []Verdict{{Item: "E1", Band: 3, Rationale: "cites\nthe  source"}}})
	out := b.String()
	for _, want := range []string{"grade:       HDS6 7/48\n", "band 3", "cites the source\n", "grader cost: 0 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("Render lacks %q:\n%s", want, out)
		}
	}
}
