package team

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// recordClaims gives each claim of a report its ledger id K<n>, records it
// as a claim event and returns the ids in the report's order; the caller
// holds t.mu.
func (t *Team) recordClaims(agentID, assignment, item string, rep *Report) []string {
	var ids []string
	for _, c := range rep.Claims {
		k := record.Claim{ID: fmt.Sprintf("K%d", len(t.claims)+1), Text: c.Text, StatedBy: agentID, Item: item,
			Evidence: c.Evidence, Artifacts: rep.Artifacts, Assignment: assignment}
		t.claims = append(t.claims, k)
		t.record(record.TypeClaim, agentID, k)
		ids = append(ids, k.ID)
	}
	return ids
}

// claimID matches a ledger id as the lead may write it: K3, k3, [K3].
var claimID = regexp.MustCompile(`^\[?[Kk]([0-9]+)\]?$`)

// findClaim finds the ledger claim ref names: by id first, then by its
// words (the latest claim stated with the same normalized words). An id
// the ledger does not hold is an error; words it does not hold are not.
// The caller holds t.mu.
func (t *Team) findClaim(ref string) (record.Claim, bool, error) {
	ref = strings.TrimSpace(ref)
	if m := claimID.FindStringSubmatch(ref); m != nil {
		id := "K" + m[1]
		for _, k := range t.claims {
			if k.ID == id {
				return k, true, nil
			}
		}
		if len(t.claims) == 0 {
			return record.Claim{}, false, fmt.Errorf("no claim %s: the ledger holds no claims yet (they come with the subagents' reports)", id)
		}
		return record.Claim{}, false, fmt.Errorf("no claim %s: the ledger holds K1 to K%d", id, len(t.claims))
	}
	want := normClaim(ref)
	for i := len(t.claims) - 1; i >= 0; i-- {
		if normClaim(t.claims[i].Text) == want {
			return t.claims[i], true, nil
		}
	}
	return record.Claim{}, false, nil
}

// normClaim is a claim's words for matching: case, spacing, surrounding
// quotes and a final period do not count.
func normClaim(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	s = strings.Trim(s, "\"'`“”‘’ ")
	return strings.TrimSpace(strings.TrimSuffix(s, "."))
}

// itemOf is a ledger claim's item; the caller holds t.mu.
func (t *Team) itemOf(id string) string {
	for _, k := range t.claims {
		if k.ID == id {
			return k.Item
		}
	}
	return ""
}

// claimLine is a claim as the lead reads it in the ledger: id, status,
// weight and why.
func claimLine(c claims.Claim) string {
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

// markClaim records the lead's mark on a claim and says where it stands.
func (t *Team) markClaim(callID string, a markArgs) tool.Result {
	switch a.Mark {
	case claims.MarkSide, claims.MarkLoadBearing, claims.MarkWithdrawn:
	default:
		return tool.Errorf("mark %q is not one of side, load_bearing, withdrawn", a.Mark)
	}
	if strings.TrimSpace(a.Reason) == "" {
		return tool.Errorf("mark_claim needs a reason: say in one sentence why %s is %s", a.Claim, a.Mark)
	}
	t.mu.Lock()
	k, found, err := t.findClaim(a.Claim)
	if err == nil && !found {
		err = fmt.Errorf("%q is no claim id; mark a claim by its id (K1, K2, … shown with each report and in board_view)", clipBytes(a.Claim, 80))
	}
	if err != nil {
		t.mu.Unlock()
		return tool.Errorf("%v", err)
	}
	t.record(record.TypeClaimMark, "lead", record.ClaimMark{Claim: k.ID, Mark: a.Mark, Reason: a.Reason, CallID: callID})
	t.mu.Unlock()
	c, _ := t.ledger().Get(k.ID)
	return tool.Result{Output: "marked " + k.ID + " " + a.Mark + "; " + claimLine(c)}
}

// maxLedgerLines bounds the claims board_view lists.
const maxLedgerLines = 200

// renderLedger writes the claim ledger as board_view shows it: one line a
// claim with its id, item and author, status and weight.
func renderLedger(w io.Writer, l *claims.Ledger) {
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
		fmt.Fprintf(w, "%s  %s  %s%s%s: %s\n", c.ID, where, c.Status, settled, weight, clipBytes(strings.Join(strings.Fields(c.Text), " "), 160))
	}
}
