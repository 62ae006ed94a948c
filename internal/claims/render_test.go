package claims_test

import (
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/claims"
)

func TestRender(t *testing.T) {
	var b strings.Builder
	claims.Render(&b, "r", nil)
	if !strings.HasPrefix(b.String(), "run r holds no claims") {
		t.Errorf("no claims: %q", b.String())
	}
	b.Reset()
	claims.Render(&b, "r", []claims.Claim{{ID: "K1", Status: "corroborated", Settled: true, Text: "sum is 6", StatedBy: "A1", Why: "verified", LoadBearing: true,
		Bears: []string{"cited by /outputs/sum.txt", "T2 → /outputs/sum.txt"}, Evidence: []string{"E1"},
		Verdicts: []claims.Verdict{{By: "V1", Verdict: "supported", Location: "/outputs/sum.txt:1"}}},
		{ID: "K2", Status: "unresolved", Text: "it is UTF-8", StatedBy: "A1", Item: "T1", Why: "no verdict", Side: "a detail"}})
	want := "K1   corroborated settled load-bearing (cited by /outputs/sum.txt; T2 → /outputs/sum.txt)  sum is 6 [A1 on -]\n" +
		"     why: verified\n     evidence: E1\n     verdict: supported by V1 at /outputs/sum.txt:1\n" +
		"K2   unresolved   side (a detail)  it is UTF-8 [A1 on T1]\n     why: no verdict\n"
	if b.String() != want {
		t.Errorf("Render:\n%q\nwant\n%q", b.String(), want)
	}
}
