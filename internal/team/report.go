package team

import (
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/verify/claim"
)

// Report is how a subagent ends its assignment (R-TEAM-2).
type Report = claim.Report

// Claim is one statement with the evidence that supports it.
type Claim = claim.Stated

// renderReport is a report as the lead (or a dependent subagent) reads it;
// ids are its claims' ledger ids, in order (none before they are recorded).
func renderReport(r *Report, ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Summary: %s\n", r.Summary)
	for i, c := range r.Claims {
		if i < len(ids) {
			fmt.Fprintf(&b, "- claim %s: %s", ids[i], c.Text)
		} else {
			fmt.Fprintf(&b, "- claim: %s", c.Text)
		}
		if len(c.Evidence) > 0 {
			fmt.Fprintf(&b, " [evidence: %s]", strings.Join(c.Evidence, ", "))
		}
		b.WriteString("\n")
	}
	if len(r.Artifacts) > 0 {
		fmt.Fprintf(&b, "Artifacts: %s\n", strings.Join(r.Artifacts, ", "))
	}
	for _, q := range r.OpenQuestions {
		fmt.Fprintf(&b, "- open question: %s\n", q)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
