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
	claims.Render(&b, "r", []claims.Claim{{ID: "K1", Status: "supported", Text: "sum is 6", StatedBy: "A1", Why: "verified", LoadBearing: true, Bears: []string{"/outputs/sum.txt"}, Evidence: []string{"E1"},
		Verdicts: []claims.Verdict{{Verdict: "supported", Location: "/outputs/sum.txt:1"}}}})
	want := "K1   supported    load-bearing (/outputs/sum.txt)  sum is 6 [A1 on -]\n" +
		"     why: verified\n     evidence: E1\n     verdict: supported at /outputs/sum.txt:1\n"
	if b.String() != want {
		t.Errorf("Render:\n%q\nwant\n%q", b.String(), want)
	}
}
