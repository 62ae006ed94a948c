package team

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
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
	want := claim.Norm(ref)
	for i := len(t.claims) - 1; i >= 0; i-- {
		if claim.Norm(t.claims[i].Text) == want {
			return t.claims[i], true, nil
		}
	}
	return record.Claim{}, false, nil
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
		err = fmt.Errorf("%q is no claim id; mark a claim by its id (K1, K2, … shown with each report and in board_view)", claim.ClipBytes(a.Claim, 80))
	}
	if err != nil {
		t.mu.Unlock()
		return tool.Errorf("%v", err)
	}
	t.record(record.TypeClaimMark, "lead", record.ClaimMark{Claim: k.ID, Mark: a.Mark, Reason: a.Reason, CallID: callID})
	t.mu.Unlock()
	c, _ := t.ledger().Get(k.ID)
	return tool.Result{Output: "marked " + k.ID + " " + a.Mark + "; " + claim.Line(c)}
}
