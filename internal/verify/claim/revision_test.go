package claim

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/claims"
)

// Kept are an item's verified claims (not those the lead withdrew, not
// unsettled ones, not other items'); a revision must restate each with
// its words and every evidence ref; a restated claim keeps its verdict
// only when its evidence cannot have changed.
func TestRevisionRules(t *testing.T) {
	sup := []claims.Verdict{{Verdict: Supported, By: "V1"}}
	l := &claims.Ledger{Claims: []claims.Claim{
		{ID: "K1", Item: "T1", Text: "the total is 42", Evidence: []string{"/inputs/a.csv", "E3"}, Status: claims.Corroborated, Settled: true, Verdicts: sup, Withdrawn: "its item T1 was reopened after it"},
		{ID: "K2", Item: "T1", Text: "the mean is 99", Status: claims.Refuted, Settled: true},
		{ID: "K3", Item: "T1", Text: "the max is 40", Evidence: []string{"/workspace/max.txt"}, Status: claims.Corroborated, Settled: true, Verdicts: sup},
		{ID: "K4", Item: "T1", Text: "the min is 2", Status: claims.Corroborated, Settled: true, Withdrawn: "withdrawn by the lead: wrong column"},
		{ID: "K5", Item: "T1", Text: "n has 2 rows", Status: claims.Corroborated}, // not settled
		{ID: "K6", Item: "T2", Text: "other", Status: claims.Corroborated, Settled: true},
	}}
	kept := Kept(l, "T1")
	if len(kept) != 2 || kept[0].ID != "K1" || kept[1].ID != "K3" {
		t.Fatalf("kept %v; want K1 and K3", kept)
	}
	redo := Redo(l, "T1", kept)
	if len(redo) != 2 || redo[0].ID != "K2" || redo[1].ID != "K5" {
		t.Fatalf("redo %v; want K2 and K5", redo)
	}
	k1 := Stated{Text: "The total is 42.", Evidence: []string{"E3", " /inputs/a.csv"}}
	k3 := Stated{Text: "the max is 40", Evidence: []string{"/workspace/max.txt"}}
	for _, c := range []struct {
		claims []Stated
		want   string // "" accepted
	}{
		{[]Stated{k1, k3, {Text: "the mean is 21"}}, ""},
		{[]Stated{k3}, "K1"},
		{[]Stated{{Text: "the total is 43", Evidence: k1.Evidence}, k3}, "K1"},
		{[]Stated{{Text: k1.Text, Evidence: []string{"E3"}}, k3}, "K1"}, // an evidence ref dropped
	} {
		err := CheckRevision(kept, &Report{Claims: c.claims})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v refused: %v", c.claims, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want+" ")):
			t.Errorf("%v: %v; want %s named", c.claims, err, c.want)
		}
	}
	rep := &Report{Claims: []Stated{{Text: "the mean is 21"}, k3, k1}}
	vs := Carried(kept, rep, []string{"K7", "K8", "K9"}, "T1")
	if len(vs) != 1 || vs[0].ClaimID != "K9" || vs[0].Verdict != Supported || !strings.Contains(vs[0].Checks[0], "carried from K1 (V1)") {
		t.Fatalf("carried %+v; want K1's verdict on K9 only (K3 cites a workspace file)", vs)
	}
}
