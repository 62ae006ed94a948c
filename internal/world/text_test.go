package world_test

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/world"
)

func TestCoordsSorted(t *testing.T) {
	if got := world.Coords(map[string]float64{"width": 3, "depth": 0.5}); got != "depth=0.5 width=3" {
		t.Errorf("Coords = %q", got)
	}
}

func TestRenderCheckNamesTheFirstFailure(t *testing.T) {
	var b strings.Builder
	rep := world.CheckReport{Problems: []string{"the empty\ndelivery passes"}}
	rep.Solution.Failures = []string{"out.txt:\nmissing", "second"}
	rep.Empty.Passed = true
	world.RenderCheck(&b, &world.World{ID: "w-1"}, rep)
	want := "world w-1: NOT usable\n  reference solution: fails (out.txt: missing)\n  empty delivery:     passes the verifier\n  PROBLEM: the empty delivery passes\n"
	if b.String() != want {
		t.Errorf("RenderCheck:\n%s\nwant:\n%s", b.String(), want)
	}
}
