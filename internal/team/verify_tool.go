package team

import (
	"context"
	"strings"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
)

// verifyTool sends one claim, its evidence and the applicable constraint —
// not the task — to a verifier agent whose only job is to attack it
// (package verify/claim). A claim of the ledger (by id, else by its words)
// gets the verdict: a supported one settles it.
func (t *Team) verifyTool() tool.Tool {
	return tool.Define("verify", "Have an independent verifier attack ONE claim: give its ledger id (K3), whose evidence comes along and whose ledger entry the verdict updates (supported settles it), or its words with evidence refs. Returns supported, refuted, insufficient or format_violation, with where, the repair and what of the evidence was cut.", 0,
		func(ctx context.Context, a claim.Args) tool.Result {
			a.Claim = strings.TrimSpace(a.Claim)
			if a.Claim == "" {
				return tool.Errorf("verify needs one claim: a ledger id (K3) or the claim's words, and evidence refs for a claim that is not in the ledger")
			}
			t.mu.Lock()
			k, found, err := t.findClaim(a.Claim)
			t.mu.Unlock()
			if err != nil {
				return tool.Errorf("%v", err)
			}
			if !found && len(a.Evidence) == 0 {
				return tool.Errorf("%q is no claim of the ledger, so verify needs at least one evidence ref for it; to verify a reported claim, name it by its id (K1, K2, … shown with each report and in board_view)", claim.ClipBytes(a.Claim, 120))
			}
			if err := t.checker.CheckRefs(t.cfg.FS, "verify", a.Evidence); err != nil {
				return tool.Errorf("%v", err)
			}
			claimID := ""
			if found {
				a.Claim, claimID = k.Text, k.ID
				a.Evidence = claim.Union(k.Evidence, a.Evidence)
			}
			callID := tool.CallID(ctx)
			t.mu.Lock()
			id := t.verifierID(callID)
			t.mu.Unlock()
			v := t.checker.Run(ctx, id, a, "", claimID, record.AgentStarted{CallID: callID}, 0)
			out := claim.Render(v)
			if claimID == "" {
				out += "\nledger: these words match no reported claim, so this verdict settles nothing; verify a reported claim by its id (K1, K2, …) to settle it"
			} else if c, ok := t.ledger().Get(claimID); ok {
				out += "\nledger: " + claim.Line(c)
			}
			return tool.Result{Output: out}
		})
}

// host is the team as the verifier, effort and the writer use it: every
// call takes t.mu, so ids and the record's order are the team's.
type host struct{ t *Team }

func (h host) TakeID(prefix string) string {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	return h.t.takeID(prefix)
}

func (h host) Started(id string, a record.AgentStarted) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	h.t.started(id, a)
}

func (h host) Verdict(id string, v *claim.Verdict) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	v.Item = h.t.itemOf(v.ClaimID)
	h.t.verified++
	h.t.record(record.TypeVerdict, id, *v)
}

func (h host) Reported(id string, rep *claim.Report) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	h.t.record(record.TypeReport, id, record.Report{Assignment: id, ReportBody: *rep})
	h.t.recordClaims(id, "", "", rep)
}

func (h host) AddItem(by, title, objective, group string) (string, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	e, err := h.t.mutate(by, func(b *board.Board) (board.Event, error) {
		return b.Add(by, title, objective, nil, group)
	})
	return e.ID, err
}
