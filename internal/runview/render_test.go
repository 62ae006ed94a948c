package runview

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	var b strings.Builder
	Render(&b, Info{RunID: "r-1", Objective: "sum\nthe  csv", Status: StatusAwaitingReview, Warnings: []string{"w1"}})
	out := b.String()
	for _, want := range []string{
		"run:         r-1\n",
		"objective:   sum the csv\n",
		"review:      pending: apodex review r-1 --approve|--reject --note TEXT\n",
		"termination: -\n",
		"WARNING:     w1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Render lacks %q:\n%s", want, out)
		}
	}
}

func TestClip(t *testing.T) {
	if got := Clip("héllo", 2); got != "hé…" {
		t.Errorf("Clip = %q", got)
	}
	if got := Clip("ok", 5); got != "ok" {
		t.Errorf("Clip = %q", got)
	}
}
