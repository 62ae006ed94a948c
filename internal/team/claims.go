package team

import (
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// recordClaims gives each claim of a report its ledger id K<n> and records
// it as a claim event; the caller holds t.mu.
func (t *Team) recordClaims(agentID, assignment, item string, rep *Report) {
	for _, c := range rep.Claims {
		k := record.Claim{ID: fmt.Sprintf("K%d", len(t.claims)+1), Text: c.Text, StatedBy: agentID, Item: item,
			Evidence: c.Evidence, Artifacts: rep.Artifacts, Assignment: assignment}
		t.claims = append(t.claims, k)
		t.record(record.TypeClaim, agentID, k)
	}
}

// claimOf finds the ledger claim a verified text is (the latest stated with
// the same words) and its item; the caller holds t.mu.
func (t *Team) claimOf(text string) (id, item string) {
	want := normClaim(text)
	for i := len(t.claims) - 1; i >= 0; i-- {
		if normClaim(t.claims[i].Text) == want {
			return t.claims[i].ID, t.claims[i].Item
		}
	}
	return "", ""
}

func normClaim(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
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
