package claim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/tool"
)

// Effort modes (R-EFFORT-1).
const (
	EffortAdaptive = "adaptive"
	EffortOff      = "off"
	// CallerInvestigator is the role of an effort wave's investigators.
	CallerInvestigator = "investigator"
	// DefaultEffortBudget is effort's share of the run's tokens so far, in
	// percent.
	DefaultEffortBudget = 25
)

// framings are the distinct angles of a claim's investigators, in order;
// a claim's later waves take framings none of its earlier waves used.
var framings = []string{
	"another source class: establish or refute the claim from a source of a different kind than the evidence it cites (another input file, a search, a fetched page), not from the cited evidence itself",
	"another method of computation: recompute the claim's result yourself by a different method than its author (for a number, compute it with bash from the raw data, e.g. awk or python, and compare)",
	"a search for a counterexample: assume the claim is false and look for the row, passage or case that would show it",
	"atomic details: check each name, number, unit, date and scope word of the claim on its own against the sources",
	"a competing hypothesis: state the most plausible other answer and find which one the sources support",
}

// Why a claim is an effort target.
const (
	whyDisputed     = "disputed"
	whyUnresolved   = "unresolved"
	whyInsufficient = "insufficient"
)

// target is one claim an effort wave investigates, and why.
type target struct {
	claims.Claim
	why string
}

// effortTargets are the load-bearing claims that are not settled:
// disputed, unresolved, or whose latest verdict is insufficient. Settled
// (refuted, or supported on its own evidence), withdrawn and side claims
// are never investigated.
func effortTargets(l *claims.Ledger) []target {
	var out []target
	for _, c := range l.Claims {
		if !c.LoadBearing || c.Settled || c.Withdrawn != "" {
			continue
		}
		switch {
		case c.Status == claims.Disputed:
			out = append(out, target{c, whyDisputed})
		case c.Status == claims.Unresolved && len(c.Verdicts) > 0 && c.Verdicts[len(c.Verdicts)-1].Verdict == Insufficient:
			out = append(out, target{c, whyInsufficient})
		case c.Status == claims.Unresolved:
			out = append(out, target{c, whyUnresolved})
		}
	}
	return out
}

// Effort runs the next effort wave when the lead's finish finds
// unsettled load-bearing claims, waves are left and effort's budget is
// not spent. It returns the wave's outcome for the lead and the reason
// finish is deferred; both are empty when no wave ran.
func (c *Checker) Effort(ctx context.Context) (string, error) {
	if c.cfg.Effort != EffortAdaptive {
		return "", nil
	}
	c.mu.Lock()
	wave := c.waves + 1
	c.mu.Unlock()
	if wave > max(c.cfg.EffortWaves, 0) {
		return "", nil
	}
	now := c.effortNow()
	targets := effortTargets(now.ledger)
	if len(targets) == 0 {
		return "", nil
	}
	ids, reasons := targetIDs(targets)
	sp := now.spent
	budget := c.effortBudget(sp)
	if budget > 0 && sp.effort >= budget {
		c.cfg.Log.Append(record.TypeEffort, "runtime", record.Effort{Phase: record.EffortBudget, Wave: wave, Claims: ids, Reasons: reasons,
			RunTokens: sp.run, BudgetTokens: budget, SpentTokens: sp.effort})
		return "", nil
	}
	c.mu.Lock()
	c.waves = wave
	c.mu.Unlock()
	outcome := c.effortWave(ctx, wave, targets, now.framings, sp, budget)
	return outcome, fmt.Errorf("finish deferred: load-bearing claims %s were not settled, so the runtime ran effort wave %d on them; its outcome follows as a runtime observation. Decide again: reopen what was refuted, or finish", strings.Join(ids, ", "), wave)
}

// effortBudget is effort's token budget: its share of the run's tokens so
// far, effort's own excluded; 0 when unbounded.
func (c *Checker) effortBudget(sp spend) int {
	pct := c.cfg.EffortBudget
	if pct == 0 {
		pct = DefaultEffortBudget
	}
	if pct < 0 {
		return 0
	}
	return max(sp.run*pct/100, 1)
}

func targetIDs(ts []target) ([]string, map[string]string) {
	ids := make([]string, len(ts))
	reasons := map[string]string{}
	for i, k := range ts {
		ids[i] = k.ID
		reasons[k.ID] = k.why
	}
	return ids, reasons
}

// investigation is one investigator of a wave: its id, claim and framing,
// and what it found.
type investigation struct {
	id, framing string
	k           target
	rep         *Report
	ev          record.Effort
}

// effortWave investigates each target with up to EffortWidth
// investigators whose framings none of the claim's earlier waves used,
// then verifies it with a focused verifier; investigators run at once up
// to the run's concurrency, and so do the verifiers after them. Every
// agent's tokens are bounded by what is left of the budget. It records
// every step as an effort event and returns the outcome for the lead.
func (c *Checker) effortWave(ctx context.Context, wave int, targets []target, used map[string][]string, sp spend, budget int) string {
	ids, reasons := targetIDs(targets)
	var jobs []*investigation
	for _, k := range targets {
		n := 0
		for _, f := range framings {
			if n == max(c.cfg.EffortWidth, 1) || slices.Contains(used[k.ID], f) {
				continue
			}
			jobs = append(jobs, &investigation{id: c.host.TakeID(InvestigatorPrefix), framing: f, k: k})
			n++
		}
	}
	verifiers := make([]string, len(targets))
	for i := range targets {
		verifiers[i] = c.host.TakeID(VerifierPrefix)
	}
	c.cfg.Log.Append(record.TypeEffort, "runtime", record.Effort{Phase: record.EffortWave, Wave: wave, Claims: ids, Reasons: reasons,
		RunTokens: sp.run, BudgetTokens: budget, SpentTokens: sp.effort})

	// Each agent of the wave may spend an equal part of what is left.
	share := 0
	if budget > 0 {
		share = max((budget-sp.effort)/max(len(jobs)+len(targets), 1), 1)
	}
	c.fanOut(len(jobs), func(i int) {
		j := jobs[i]
		j.rep, j.ev = c.investigate(ctx, wave, j.id, j.k, j.framing, share)
		c.cfg.Log.Append(record.TypeEffort, j.id, j.ev)
	})
	verdicts := make([]Verdict, len(targets))
	c.fanOut(len(targets), func(i int) {
		k := targets[i]
		var found []string
		refs := slices.Clone(k.Evidence)
		for _, j := range jobs {
			if j.k.ID != k.ID || j.rep == nil {
				continue
			}
			found = append(found, fmt.Sprintf("%s (%s): %s", j.id, framingName(j.framing), j.rep.Summary))
			for _, st := range j.rep.Claims {
				refs = Union(refs, st.Evidence)
			}
		}
		focus := fmt.Sprintf("This claim is load-bearing and %s (%s). Independent investigators found:\n- %s", k.why, k.Why, strings.Join(OrNone(found, "(nothing)"), "\n- "))
		verdicts[i] = c.Run(ctx, verifiers[i], Args{Claim: k.Text, Evidence: refs}, focus, k.ID,
			record.AgentStarted{Wave: wave}, share)
	})

	var b strings.Builder
	fmt.Fprintf(&b, "Effort wave %d on %s.\n", wave, strings.Join(ids, ", "))
	for i, k := range targets {
		var found []string
		for _, j := range jobs {
			if j.k.ID == k.ID && j.rep != nil {
				found = append(found, fmt.Sprintf("%s (%s): %s", j.id, framingName(j.framing), j.rep.Summary))
			}
		}
		v := verdicts[i]
		fmt.Fprintf(&b, "- %s %q (%s): investigators: %s; focused verdict: %s", k.ID, k.Text, k.why, strings.Join(OrNone(found, "none reported"), " | "), v.Verdict)
		if v.Repair != "" {
			fmt.Fprintf(&b, " (repair: %s)", v.Repair)
		}
		b.WriteString("\n")
	}
	after := c.effortNow()
	l := after.ledger
	statuses := map[string]string{}
	for _, id := range ids {
		k, _ := l.Get(id)
		statuses[id] = k.Status
		fmt.Fprintf(&b, "%s is now %s: %s", id, k.Status, k.Why)
		if k.Status == claims.Refuted {
			if k.Item != "" {
				fmt.Fprintf(&b, " — finish is refused while it is load-bearing: reopen %s (board_reopen) to repair it, or withdraw it (mark_claim)", k.Item)
			} else {
				b.WriteString(" — finish is refused while it is load-bearing: withdraw it (mark_claim)")
			}
		}
		b.WriteString("\n")
	}
	c.cfg.Log.Append(record.TypeEffort, "runtime", record.Effort{Phase: record.EffortOutcome, Wave: wave, Claims: ids, Statuses: statuses,
		BudgetTokens: budget, SpentTokens: after.spent.effort})
	return strings.TrimSpace(b.String())
}

// fanOut runs f(0) … f(n-1) at once, at most the run's concurrency at a
// time, and waits for all.
func (c *Checker) fanOut(n int, f func(i int)) {
	sem := make(chan struct{}, max(c.cfg.Concurrency, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// OrNone is s, or none alone when s is empty.
func OrNone(s []string, none string) []string {
	if len(s) == 0 {
		return []string{none}
	}
	return s
}

func framingName(f string) string { return strings.SplitN(f, ":", 2)[0] }

// usedFramings are the framings each claim's investigators had so far.
func usedFramings(st *runstate.State) map[string][]string {
	out := map[string][]string{}
	for _, ef := range st.Efforts {
		if ef.Phase == record.EffortInvestigator {
			out[ef.Claim] = append(out[ef.Claim], ef.Framing)
		}
	}
	return out
}

// investigate runs investigator id on claim k with one framing and at most
// maxTokens tokens (0: unbounded); its report's claims enter the ledger
// (stated by the investigator, no item).
func (c *Checker) investigate(ctx context.Context, wave int, id string, k target, framing string, maxTokens int) (*Report, record.Effort) {
	c.host.Started(id, record.AgentStarted{Role: CallerInvestigator, Claim: k.ID, Wave: wave})
	ev := record.Effort{Phase: record.EffortInvestigator, Wave: wave, Claim: k.ID, Investigator: id, Framing: framing}
	fs := c.cfg.FS.View(nil)
	fs.ReadOnly = true
	box := &ReportBox{}
	var tools []tool.Tool
	if c.cfg.VerifierTools != nil {
		tools = c.cfg.VerifierTools(id)
	}
	tools = append(tools, NewReportTool(box, fs, c.ClaimRefs(fs)))
	set := tool.NewSet(tools...)
	task := fmt.Sprintf("Claim %s under investigation:\n%s\n\nIts cited evidence: %s\nIts status: %s (%s).\n\nYour framing: %s.\n\nInvestigate independently; do not trust the claim. End with report: state what you found as a claim (with its exact numbers) and the evidence refs you used.",
		k.ID, k.Text, strings.Join(k.Evidence, ", "), k.Status, k.Why, framing)
	budget := c.cfg.SubBudget
	if maxTokens > 0 && (budget.MaxTokens == 0 || maxTokens < budget.MaxTokens) {
		budget.MaxTokens = maxTokens
	}
	out := agent.Run(ctx, agent.Config{
		ID: id, Role: CallerInvestigator, FinishTool: "report", Model: c.cfg.Model, Tools: set, Log: c.cfg.Log, FS: fs,
		System: "You are an independent investigator. You receive one claim another agent made and a framing; you check it by that framing only. Every plane is read-only to you.\n\n" + agent.ToolNotes(set),
		Budget: budget, Retry: c.cfg.Retry, Clock: c.cfg.Clock, BeforeCall: c.cfg.BeforeCall, OnStep: c.cfg.OnStep,
	}, task)
	ev.State, ev.Turns = string(out.Termination), out.Turns
	ev.PromptTokens, ev.CompletionTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens
	rep := box.Get()
	if rep == nil && out.Termination == agent.Completed && out.Summary != "" {
		rep = &Report{Summary: out.Summary}
	}
	if rep != nil {
		ev.State = record.AssignmentReported
		c.host.Reported(id, rep)
	}
	return rep, ev
}

// effortNow is what effort reads of the run now, from its live state.
type effortNow struct {
	ledger   *claims.Ledger
	spent    spend
	framings map[string][]string // claim -> the framings its investigators had
}

func (c *Checker) effortNow() effortNow {
	now := effortNow{ledger: &claims.Ledger{}, framings: map[string][]string{}}
	c.cfg.State.Read(func(st *runstate.State) {
		now = effortNow{ledger: st.Claims.Ledger(), spent: spendOf(st), framings: usedFramings(st)}
	})
	return now
}

// spend is what the run's model calls cost so far, in tokens: effort's
// agents (investigators and the verifiers a wave started) and the rest.
type spend struct{ run, effort int }

func spendOf(st *runstate.State) spend {
	var sp spend
	for _, a := range st.Agents {
		if a.Wave > 0 || a.Role == CallerInvestigator {
			sp.effort += a.Tokens
		} else {
			sp.run += a.Tokens
		}
	}
	return sp
}
