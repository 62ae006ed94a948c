package publish

import (
	"context"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

type claimArgs struct {
	Paths []string `json:"paths" desc:"The exact files under /outputs you will deliver, e.g. [\"/outputs/report.md\"]. Not /outputs/scratch/ (always writable, never delivered)."`
}

// ClaimTool is the claim_outputs tool of one agent (R-PUB-1).
func ClaimTool(plane *Plane, agent string) tool.Tool {
	return tool.Define("claim_outputs",
		"Take the run's publishing lease and declare the exact files under /outputs you will deliver. Only the lease holder may write under /outputs, and only its declared paths, with the file tools or bash; anyone may write intermediate files under /outputs/scratch/ (within a quota; never delivered). Call it again to add paths. When the run ends each declared path must be a non-empty regular file whose content changed since it was declared, or delivery fails. While another agent holds the lease the call is refused with its name.",
		0,
		func(_ context.Context, a claimArgs) tool.Result {
			g, err := plane.Claim(agent, a.Paths)
			if err != nil {
				return tool.Errorf("%v", err)
			}
			return tool.Result{Output: grantText(g), Meta: &record.ToolMeta{Lease: Granted, Added: g.Added}}
		})
}

func grantText(g Grant) string {
	var b strings.Builder
	fmt.Fprintf(&b, "you hold the publishing lease; your manifest (%d paths):\n", len(g.Paths))
	for _, pp := range g.Paths {
		base, now := g.Baselines[pp], g.Now[pp]
		switch {
		case base == Absent && (now == Absent || now == ""):
			fmt.Fprintf(&b, "  %s  (does not exist yet)\n", pp)
		case now == Absent:
			fmt.Fprintf(&b, "  %s  (does not exist now; it existed as %s when first declared)\n", pp, base)
		case now != "" && now != base:
			// Written earlier in this run (by this agent or an earlier
			// holder): it is delivered as it stands unless changed.
			fmt.Fprintf(&b, "  %s  (exists, %d bytes, written earlier in this run: it counts as delivered as it stands; read it and revise it rather than start over)\n", pp, g.Sizes[pp])
		default:
			fmt.Fprintf(&b, "  %s  (exists, %s: it counts as delivered only once its content changes)\n", pp, base)
		}
	}
	b.WriteString("Only these paths under /outputs are writable by you (write_file, edit_file, or bash: changes to other /outputs paths in bash are not kept). They are reconciled when the run ends: each must be a non-empty regular file (no links) that differs from the state above. Intermediate files go under /outputs/scratch/.")
	return b.String()
}
