package claim

import (
	"fmt"
	"io"
	"strings"

	"github.com/apodex/apodex/internal/claims"
)

// Line is a claim as the lead reads it in the ledger: id, status,
// weight and why.
func Line(c claims.Claim) string {
	out := fmt.Sprintf("%s is %s", c.ID, c.Status)
	if c.Settled {
		out += " (settled)"
	}
	out += ": " + c.Why
	switch {
	case c.Withdrawn != "":
		out += "; withdrawn: " + c.Withdrawn
	case c.LoadBearing:
		out += "; load-bearing: " + strings.Join(c.Bears, ", ")
	case c.Side != "":
		out += "; side: " + c.Side
	}
	return out
}

// maxLedgerLines bounds the claims board_view lists.
const maxLedgerLines = 200

// RenderLedger writes the claim ledger as board_view shows it: one line a
// claim with its id, item and author, status and weight.
func RenderLedger(w io.Writer, l *claims.Ledger) {
	if len(l.Claims) == 0 {
		return
	}
	fmt.Fprintf(w, "\nClaims (verify one by id; mark_claim one side if the deliverables do not rest on it):\n")
	for i, c := range l.Claims {
		if i == maxLedgerLines {
			fmt.Fprintf(w, "… and %d more\n", len(l.Claims)-i)
			break
		}
		weight := ""
		switch {
		case c.Withdrawn != "":
			weight = ", withdrawn"
		case c.LoadBearing:
			weight = ", load-bearing"
		case c.Side != "":
			weight = ", side"
		}
		settled := ""
		if c.Settled {
			settled = " settled"
		}
		where := c.StatedBy
		if c.Item != "" {
			where = c.Item + "/" + c.StatedBy
		}
		fmt.Fprintf(w, "%s  %s  %s%s%s: %s\n", c.ID, where, c.Status, settled, weight, ClipBytes(strings.Join(strings.Fields(c.Text), " "), 160))
	}
}
