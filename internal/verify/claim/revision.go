package claim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/evidence"
)

// A revision keeps what was verified (issue 26 item 5). When the lead
// reopens an item and dispatches it again, the work is revised, not
// started over: the item's verified claims (corroborated and settled: a
// verifier supported them on their own evidence) are kept, and only the
// rest — refuted, disputed, unresolved — is redone. The runtime enforces
// it: the revision's report is refused while it drops a verified claim or
// rewrites its words or evidence, and a verified claim restated unchanged
// keeps its verdict when its evidence cannot have changed (evidence ids,
// bash calls, /inputs files), so it is never verified or investigated
// again.

// byLead starts the Withdrawn of a claim the lead withdrew.
const byLead = "withdrawn by the lead"

// Kept are the verified claims of item a revision must keep: stated on it,
// corroborated and settled, not withdrawn by the lead (a claim withdrawn
// because its item was reopened is kept); the latest of equal words.
func Kept(l *claims.Ledger, item string) []claims.Claim {
	var out []claims.Claim
	for _, c := range l.Claims {
		if item == "" || c.Item != item || c.Status != claims.Corroborated || !c.Settled || strings.HasPrefix(c.Withdrawn, byLead) {
			continue
		}
		out = slices.DeleteFunc(out, func(o claims.Claim) bool { return Norm(o.Text) == Norm(c.Text) })
		out = append(out, c)
	}
	return out
}

// Redo are the claims of item a revision redoes: stated on it and neither
// verified nor withdrawn by the lead, the latest of equal words.
func Redo(l *claims.Ledger, item string, kept []claims.Claim) []claims.Claim {
	var out []claims.Claim
	for _, c := range l.Claims {
		if item == "" || c.Item != item || strings.HasPrefix(c.Withdrawn, byLead) ||
			slices.ContainsFunc(kept, func(k claims.Claim) bool { return Norm(k.Text) == Norm(c.Text) }) {
			continue
		}
		out = slices.DeleteFunc(out, func(o claims.Claim) bool { return Norm(o.Text) == Norm(c.Text) })
		out = append(out, c)
	}
	return out
}

// Norm is a claim's words for matching: case, spacing, surrounding quotes
// and a final period do not count.
func Norm(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	s = strings.Trim(s, "\"'`“”‘’ ")
	return strings.TrimSpace(strings.TrimSuffix(s, "."))
}

// restates is the index of rep's claim that restates k unchanged (its
// words, and every evidence ref it cited), or -1.
func restates(rep *Report, k claims.Claim) int {
	for i, c := range rep.Claims {
		if Norm(c.Text) != Norm(k.Text) {
			continue
		}
		all := true
		for _, ref := range k.Evidence {
			all = all && slices.ContainsFunc(c.Evidence, func(r string) bool { return strings.TrimSpace(r) == strings.TrimSpace(ref) })
		}
		if all {
			return i
		}
	}
	return -1
}

// CheckRevision refuses a revision's report that drops a kept claim or
// rewrites its words or evidence.
func CheckRevision(kept []claims.Claim, rep *Report) error {
	var lost []string
	for _, k := range kept {
		if restates(rep, k) < 0 {
			lost = append(lost, fmt.Sprintf("%s %q [evidence: %s]", k.ID, ClipBytes(k.Text, 200), strings.Join(k.Evidence, ", ")))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("this is a revision of a reopened item, and it drops or rewrites verified claims: %s. Restate each unchanged among your claims (the same words and evidence; its verification carries over); redo only what was refuted or unsettled", strings.Join(lost, "; "))
}

// immutable reports whether a ref names evidence that cannot change
// during a run: an evidence id, a recorded bash call, an input file.
func immutable(ref string) bool {
	ref = strings.TrimSpace(ref)
	return evidence.IsID(ref) || strings.HasPrefix(ref, commandPrefix) || strings.HasPrefix(ref, "/inputs/")
}

// Carried are the verdicts a revision's claims keep: for the claim of rep
// at index i, recorded as ids[i], that restates kept claim k whose
// evidence is immutable, a supported verdict carried from k's last one.
func Carried(kept []claims.Claim, rep *Report, ids []string, item string) []Verdict {
	var out []Verdict
	for _, k := range kept {
		i := restates(rep, k)
		if i < 0 || i >= len(ids) || len(k.Verdicts) == 0 || len(k.Evidence) == 0 {
			continue
		}
		if slices.ContainsFunc(k.Evidence, func(r string) bool { return !immutable(r) }) {
			continue
		}
		last := k.Verdicts[len(k.Verdicts)-1]
		out = append(out, Verdict{Claim: rep.Claims[i].Text, ClaimID: ids[i], Item: item, Verdict: Supported, Evidence: k.Evidence,
			Checks: []string{"carried from " + k.ID + " (" + last.By + ")"},
			Reason: fmt.Sprintf("restated unchanged in a revision of %s; %s, whose verdict this is, cites the same immutable evidence", item, k.ID)})
	}
	return out
}

// RevisionNote tells a revision's subagent what it keeps and what it
// redoes.
func RevisionNote(item string, kept, redo []claims.Claim) string {
	if len(kept) == 0 && len(redo) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s was reopened: this is a revision, not a fresh start.\n", item)
	if len(kept) > 0 {
		b.WriteString("Verified claims — restate each unchanged in your report (the same words and evidence; a report that drops or rewrites one is refused, and its verification carries over):\n")
		for _, k := range kept {
			fmt.Fprintf(&b, "- %s: %s [evidence: %s]\n", k.ID, k.Text, strings.Join(k.Evidence, ", "))
		}
	}
	if len(redo) > 0 {
		b.WriteString("Redo these (not verified):\n")
		for _, c := range redo {
			fmt.Fprintf(&b, "- %s (%s: %s): %s", c.ID, c.Status, c.Why, c.Text)
			if n := len(c.Verdicts); n > 0 && c.Verdicts[n-1].Repair != "" {
				fmt.Fprintf(&b, " — repair: %s", c.Verdicts[n-1].Repair)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
