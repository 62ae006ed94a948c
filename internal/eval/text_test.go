package eval

import (
	"strings"
	"testing"
)

func TestRenderMarksMissingScores(t *testing.T) {
	half := 0.5
	var b strings.Builder
	Render(&b, Report{ID: "e-1", Suite: "s", Done: 1, Total: 2, Configs: []ConfigReport{{Name: "base", Mode: "react", Rollouts: 1, PassRate: 1, Interval: [2]float64{0.2, 1}, Mean: MeanVector{Completeness: &half}}}})
	lines := strings.Split(b.String(), "\n")
	if lines[0] != "eval e-1 (s): 1/2 rollouts done" || !strings.HasPrefix(lines[1], "config") {
		t.Fatalf("head:\n%s", b.String())
	}
	row := strings.Fields(lines[2])
	if row[0] != "base" || row[3] != "1.00" || row[4] != "[0.20,1.00]" || row[5] != "0.50" || row[6] != "-" || row[len(row)-1] != "-" {
		t.Errorf("row %q", lines[2])
	}
}
