package claims

import (
	"fmt"
	"io"
	"strings"
)

// Render writes the claims of run runID as `apodex claims` prints them:
// each claim's status, whether it is settled, what it weighs (load-bearing
// and what rests on it, side, or withdrawn), its text and author, then
// why, its evidence, artifacts and every verdict on it.
func Render(w io.Writer, runID string, cs []Claim) {
	if len(cs) == 0 {
		fmt.Fprintf(w, "run %s holds no claims (claims come from subagents' reports in team mode)\n", runID)
		return
	}
	for _, k := range cs {
		lb := ""
		switch {
		case k.Withdrawn != "":
			lb = " withdrawn (" + k.Withdrawn + ")"
		case k.LoadBearing:
			lb = " load-bearing (" + strings.Join(k.Bears, "; ") + ")"
		case k.Side != "":
			lb = " side (" + k.Side + ")"
		}
		if k.Settled {
			lb = " settled" + lb
		}
		fmt.Fprintf(w, "%-4s %-12s%s  %s [%s on %s]\n", k.ID, k.Status, lb, k.Text, k.StatedBy, dash(k.Item))
		fmt.Fprintf(w, "     why: %s\n", k.Why)
		if len(k.Evidence) > 0 {
			fmt.Fprintf(w, "     evidence: %s\n", strings.Join(k.Evidence, ", "))
		}
		if len(k.Artifacts) > 0 {
			fmt.Fprintf(w, "     artifacts: %s\n", strings.Join(k.Artifacts, ", "))
		}
		for _, v := range k.Verdicts {
			fmt.Fprintf(w, "     verdict: %s", v.Verdict)
			if v.By != "" {
				fmt.Fprintf(w, " by %s", v.By)
			}
			if v.Location != "" {
				fmt.Fprintf(w, " at %s", v.Location)
			}
			if len(v.Checks) > 0 {
				fmt.Fprintf(w, " (checks: %s)", strings.Join(v.Checks, "; "))
			}
			fmt.Fprintln(w)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
