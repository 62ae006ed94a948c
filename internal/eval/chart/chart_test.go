package chart

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/eval"
)

func report() (eval.Report, []eval.Result) {
	plan := &eval.Plan{ID: "E1", Suite: "demo", Configs: []eval.Config{{Name: "small"}, {Name: "empty"}, {Name: "team", Mode: "team"}}}
	var rs []eval.Result
	for i := range 6 {
		rs = append(rs, eval.Result{Config: "small", Score: eval.Score{Correct: float64(i % 2), Tokens: 200 + 10*i}})
		rs = append(rs, eval.Result{Config: "team", Score: eval.Score{Correct: 1, Tokens: 900 + 20*i}})
	}
	return eval.Summarize(plan, rs), rs
}

// TestPointsAreTheReportsNumbers: the plot draws each configuration with
// rollouts at its mean tokens and pass rate with the Wilson interval, in
// suite colours (a configuration without rollouts keeps its colour slot).
func TestPointsAreTheReportsNumbers(t *testing.T) {
	rep, _ := report()
	ps := Points(rep)
	if len(ps) != 2 {
		t.Fatalf("points %+v, want small and team", ps)
	}
	small, team := ps[0], ps[1]
	if small.Config != "small" || small.Colour != "blue" || small.PassRate != 0.5 || small.Tokens != 225 || small.Low != rep.Configs[0].Interval[0] || small.High != rep.Configs[0].Interval[1] {
		t.Errorf("small: %+v", small)
	}
	if team.Config != "team" || team.Colour != "green" || team.PassRate != 1 || team.High != 1 || team.Low <= 0.5 {
		t.Errorf("team: %+v", team)
	}
}

// TestWriteDrawsAPNG writes the plot to the test's artifacts for review.
func TestWriteDrawsAPNG(t *testing.T) {
	rep, rs := report()
	var buf bytes.Buffer
	if err := Write(&buf, rep, rs); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
		t.Errorf("plot is %v", b)
	}
	out := filepath.Join(t.ArtifactDir(), "eval.png")
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("plot: %s", out)
}
