package eval

import (
	"fmt"
	"io"
)

// Render writes rep as the table of `apodex eval show`: one row per
// configuration with its pass rate and 95% interval, the mean scores
// ("-" where no rollout had one), lift and compute ratio.
func Render(w io.Writer, rep Report) {
	fmt.Fprintf(w, "eval %s (%s): %d/%d rollouts done\n", rep.ID, rep.Suite, rep.Done, rep.Total)
	fmt.Fprintf(w, "%-14s %-6s %5s %-16s %-8s %-6s %-6s %-6s %-6s %-9s %-7s %s\n",
		"config", "mode", "n", "pass (95% CI)", "complete", "prov", "recov", "interv", "wall_s", "tokens", "lift", "compute")
	for _, c := range rep.Configs {
		ratio := "-"
		if c.ComputeRatio != nil {
			ratio = fmt.Sprintf("%.2fx", *c.ComputeRatio)
		}
		fmt.Fprintf(w, "%-14s %-6s %5d %-16s %-8s %-6s %-6s %-6s %-6.1f %-9.0f %+-7.2f %s\n",
			c.Name, c.Mode, c.Rollouts, fmt.Sprintf("%.2f [%.2f,%.2f]", c.PassRate, c.Interval[0], c.Interval[1]),
			opt(c.Mean.Completeness), opt(c.Mean.Provenance), opt(c.Mean.Recovery), opt(c.Mean.Intervention),
			c.Mean.WallS, c.Mean.Tokens, c.Lift, ratio)
	}
}

func opt(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}
