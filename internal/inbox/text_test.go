package inbox

import (
	"strings"
	"testing"
)

func TestBudgetArgs(t *testing.T) {
	id, b, pairs, err := BudgetArgs([]string{"turns=+10", "r-1", "deadline=+5m"})
	if err != nil || id != "r-1" || b["turns"] != "+10" || b["deadline"] != "+5m" || pairs != "turns=+10 deadline=+5m" {
		t.Fatalf("BudgetArgs = %q %v %q %v", id, b, pairs, err)
	}
	for _, c := range []struct {
		words []string
		hint  string
	}{
		{[]string{"turns=+10"}, "give the run id"},
		{[]string{"turns=+10", "a", "b"}, `not "a", "b"`},
		{[]string{"bogus=3", "r-1"}, "use KEY=VALUE pairs"},
	} {
		if _, _, _, err := BudgetArgs(c.words); err == nil || !strings.Contains(err.Error(), c.hint) {
			t.Errorf("BudgetArgs(%q) = %v; want an error naming %q", c.words, err, c.hint)
		}
	}
}

func TestRenderListClipsText(t *testing.T) {
	var b strings.Builder
	RenderList(&b, []Message{{ID: "M1", State: StateDelivered, Seq: 7, Class: "note", Text: strings.Repeat("a", 80)}, {ID: "M2", State: "queued", Text: "two\nlines"}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], " 7 ") || !strings.HasSuffix(lines[1], strings.Repeat("a", 70)+"…") || !strings.HasSuffix(lines[2], "two lines") || !strings.Contains(lines[2], " - ") {
		t.Errorf("RenderList:\n%s", b.String())
	}
}
