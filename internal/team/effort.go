package team

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// Effort modes (R-EFFORT-1).
const (
	EffortAdaptive = "adaptive"
	EffortOff      = "off"
	// CallerInvestigator is the role of an effort wave's investigators.
	CallerInvestigator = "investigator"
)

// framings are the distinct angles of a claim's investigators, in order;
// wave w starts where wave w-1 stopped, so later waves try other angles.
var framings = []string{
	"another source class: establish or refute the claim from a source of a different kind than the evidence it cites (another input file, a search, a fetched page), not from the cited evidence itself",
	"another method of computation: recompute the claim's result yourself by a different method than its author (for a number, compute it with bash from the raw data, e.g. awk or python, and compare)",
	"a search for a counterexample: assume the claim is false and look for the row, passage or case that would show it",
}

// effortTargets are the load-bearing claims that are not settled: disputed,
// unresolved, or whose latest verdict is insufficient. Refuted and
// corroborated claims are settled and never re-investigated.
func effortTargets(l *claims.Ledger) []claims.Claim {
	var out []claims.Claim
	for _, c := range l.Claims {
		if c.LoadBearing && (c.Status == claims.Disputed || c.Status == claims.Unresolved) {
			out = append(out, c)
		}
	}
	return out
}

// ledger folds the run's record into the claim ledger.
func (t *Team) ledger() *claims.Ledger {
	if t.cfg.Log == nil {
		return &claims.Ledger{}
	}
	c, err := record.Read(t.cfg.Log.Dir())
	if err != nil {
		return &claims.Ledger{}
	}
	return claims.Fold(c.Events)
}

// maybeEffort runs the next effort wave when the lead's finish finds
// unsettled load-bearing claims and waves are left; it returns the reason
// finish is deferred, or nil. The outcome reaches the lead as a runtime
// observation before its next call.
func (t *Team) maybeEffort() error {
	if t.cfg.Effort != EffortAdaptive {
		return nil
	}
	t.mu.Lock()
	wave := t.waves + 1
	t.mu.Unlock()
	if wave > max(t.cfg.EffortWaves, 0) {
		return nil
	}
	targets := effortTargets(t.ledger())
	if len(targets) == 0 {
		return nil
	}
	t.mu.Lock()
	t.waves = wave
	t.mu.Unlock()
	outcome := t.effortWave(t.ctx, wave, targets)
	t.mu.Lock()
	t.notices = append(t.notices, notice{Assignment: "effort", Text: outcome})
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	ids := make([]string, len(targets))
	for i, k := range targets {
		ids[i] = k.ID
	}
	return fmt.Errorf("finish deferred: load-bearing claims %s were not settled, so the runtime ran effort wave %d on them; its outcome follows as a runtime observation. Decide again: reopen what was refuted, or finish", strings.Join(ids, ", "), wave)
}

// effortWave investigates each target with EffortWidth investigators of
// distinct framings, then verifies it with a focused verifier; it records
// every step as an effort event and returns the outcome for the lead.
func (t *Team) effortWave(ctx context.Context, wave int, targets []claims.Claim) string {
	width := max(t.cfg.EffortWidth, 1)
	ids := make([]string, len(targets))
	for i, k := range targets {
		ids[i] = k.ID
	}
	t.record(record.TypeEffort, "runtime", record.Effort{Phase: record.EffortWave, Wave: wave, Claims: ids})
	var b strings.Builder
	fmt.Fprintf(&b, "Effort wave %d on %s.\n", wave, strings.Join(ids, ", "))
	for _, k := range targets {
		var found []string
		refs := slices.Clone(k.Evidence)
		for i := range width {
			framing := framings[((wave-1)*width+i)%len(framings)]
			rep, ev := t.investigate(ctx, wave, k, framing)
			t.record(record.TypeEffort, ev.Investigator, ev)
			if rep == nil {
				continue
			}
			found = append(found, fmt.Sprintf("%s (%s): %s", ev.Investigator, strings.SplitN(framing, ":", 2)[0], rep.Summary))
			for _, c := range rep.Claims {
				for _, r := range c.Evidence {
					if !slices.Contains(refs, r) {
						refs = append(refs, r)
					}
				}
			}
		}
		focus := fmt.Sprintf("This claim is load-bearing and %s (%s). Independent investigators found:\n- %s", k.Status, k.Why, strings.Join(append(found, "(nothing else)")[:max(len(found), 1)], "\n- "))
		v := t.runVerifier(ctx, verifyArgs{Claim: k.Text, Evidence: refs}, focus, k.ID)
		fmt.Fprintf(&b, "- %s %q: investigators: %s; focused verdict: %s", k.ID, k.Text, strings.Join(append(found, "none reported")[:max(len(found), 1)], " | "), v.Verdict)
		if v.Repair != "" {
			fmt.Fprintf(&b, " (repair: %s)", v.Repair)
		}
		b.WriteString("\n")
	}
	l := t.ledger()
	statuses := map[string]string{}
	for _, id := range ids {
		c, _ := l.Get(id)
		statuses[id] = c.Status
		fmt.Fprintf(&b, "%s is now %s: %s", id, c.Status, c.Why)
		if c.Item != "" && c.Status == claims.Refuted {
			fmt.Fprintf(&b, " — reopen %s (board_reopen) to repair it", c.Item)
		}
		b.WriteString("\n")
	}
	t.record(record.TypeEffort, "runtime", record.Effort{Phase: record.EffortOutcome, Wave: wave, Claims: ids, Statuses: statuses})
	return strings.TrimSpace(b.String())
}

// investigate runs one investigator on claim k with one framing; its
// report's claims enter the ledger (stated by the investigator, no item).
func (t *Team) investigate(ctx context.Context, wave int, k claims.Claim, framing string) (*Report, record.Effort) {
	t.mu.Lock()
	t.investigators++
	id := fmt.Sprintf("I%d", t.investigators)
	t.mu.Unlock()
	ev := record.Effort{Phase: record.EffortInvestigator, Wave: wave, Claim: k.ID, Investigator: id, Framing: framing}
	fs := t.cfg.FS.View(nil)
	fs.ReadOnly = true
	box := &reportBox{}
	var tools []tool.Tool
	if t.cfg.VerifierTools != nil {
		tools = t.cfg.VerifierTools(id)
	}
	tools = append(tools, newReportTool(box, fs, t.claimRefs(fs)))
	set := tool.NewSet(tools...)
	task := fmt.Sprintf("Claim %s under investigation:\n%s\n\nIts cited evidence: %s\nIts status: %s (%s).\n\nYour framing: %s.\n\nInvestigate independently; do not trust the claim. End with report: state what you found as a claim (with its exact numbers) and the evidence refs you used.",
		k.ID, k.Text, strings.Join(k.Evidence, ", "), k.Status, k.Why, framing)
	out := agent.Run(ctx, agent.Config{
		ID: id, Role: CallerInvestigator, FinishTool: "report", Model: t.cfg.Model, Tools: set, Log: t.cfg.Log, FS: fs,
		System: "You are an independent investigator. You receive one claim another agent made and a framing; you check it by that framing only. Every plane is read-only to you.\n\n" + agent.ToolNotes(set),
		Budget: t.cfg.SubBudget, Retry: t.cfg.Retry, Clock: t.cfg.Clock, BeforeCall: t.cfg.SubBeforeCall, OnStep: t.cfg.OnStep,
	}, task)
	ev.State, ev.Turns = string(out.Termination), out.Turns
	ev.PromptTokens, ev.CompletionTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens
	rep := box.get()
	if rep == nil && out.Termination == agent.Completed && out.Summary != "" {
		rep = &Report{Summary: out.Summary}
	}
	if rep != nil {
		ev.State = Reported
		t.mu.Lock()
		t.record(record.TypeReport, id, record.Report{Assignment: id, ReportBody: *rep})
		t.recordClaims(id, "", "", rep)
		t.mu.Unlock()
	}
	return rep, ev
}
