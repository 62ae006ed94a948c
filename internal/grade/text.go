package grade

import (
	"fmt"
	"io"
	"strings"
)

// Render writes g as text: the total, each capability, each item with
// its stages, and what grading cost (`apodex grade`, `show --grade`).
func Render(w io.Writer, g *Result) {
	fmt.Fprintf(w, "grade:       %s %d/%d\n", g.Rubric, g.Total, g.Max)
	for _, c := range g.Capabilities {
		fmt.Fprintf(w, "  %-44s %d/%d\n", c.Name, c.Score, c.Max)
	}
	for _, it := range g.Items {
		var stages []string
		for _, h := range it.History {
			stages = append(stages, fmt.Sprintf("%s %d", h.Stage, h.Band))
		}
		fmt.Fprintf(w, "  %-16s band %d  cites %v  (%s) %s\n", it.Item, it.Band, it.Cites, strings.Join(stages, " → "), strings.Join(strings.Fields(it.Rationale), " "))
	}
	var st []string
	for _, s := range g.Stages {
		st = append(st, fmt.Sprintf("%s %d call(s) %d tokens", s.Stage, s.Attempts, s.Usage.TotalTokens))
	}
	fmt.Fprintf(w, "grader cost: %d tokens (%s)\n", g.Usage.TotalTokens, strings.Join(st, "; "))
}
