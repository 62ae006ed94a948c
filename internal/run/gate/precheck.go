// Package gate is the final gate of a run (R-CONTRACT): the cheap checks an
// agent runs with check_deliverables, the one repair turn at its first
// finish (cheap checks and the contract's costly clauses), the verdict at
// the end of the run (delivery, deliverable checks, verification clauses
// in a fresh sandbox) and its rerun on a finished run (apodex verify).
//
// Guarantees:
//   - a finish is refused at most once (a resumed run that had its repair
//     turn gets none again); every later finish goes to the final gate;
//   - verification clauses run in a sandbox of the kind the run's commands
//     ran under where it still works, never without one;
//   - costly clause results a finish obtained are reused at the end only
//     when /outputs and /workspace have not changed since;
//   - every check and clause result is recorded as an event.
package gate

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/live"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify"
)

// Precheck runs the contract's cheap clauses on the deliverables as they
// stand — the delivery as it would reconcile now, the deliverable checks,
// the source_alignment clauses and, in a team run, the [K3] citations of
// the deliverables against the claim ledger — without a sandbox or a
// model. The agent calls it as check_deliverables. At the first finish
// the final gate's costly clauses run too (finalcheck.go); a finish whose
// deliverables fail any of them is refused once with the failures (its
// repair turn), and the next goes to the final gate, which checks
// everything.
type Precheck struct {
	Ctl   *live.Control
	Plane *publish.Plane
	Env   verify.Env // Inputs, Outputs, Evidence
	Log   *record.Log
	// Final is the final gate's env (Trace, Judge, Deliverables too) and
	// SandboxKind the run's sandbox; nil Final: the costly clauses are
	// left to the final gate.
	Final       *verify.Env
	SandboxKind string
	// Team: only a team's agents state claims; a run without a team has
	// no ledger to check (and reads no record for it).
	Team bool
	// Repaired: the one repair turn was given (set before the agent
	// runs, from RepairGiven, in a resumed run).
	Repaired bool

	mu   sync.Mutex
	last *verify.Kept // the costly clauses' results at the last finish
}

// run checks the deliverables; it returns how many checks ran and the
// failures, each with its path (and line where there is one).
func (p *Precheck) run(ctx context.Context) (int, []string) {
	c := p.Ctl.Current()
	if c == nil {
		c = &contract.Contract{}
	}
	n := 0
	var failures []string
	d := p.Plane.Reconcile()
	delivered := map[string]bool{}
	for _, e := range d.Entries {
		n++
		delivered[e.Path] = e.Status == publish.Delivered
		if e.Status != publish.Delivered {
			failures = append(failures, fmt.Sprintf("delivery: %s %s (%s)", e.Path, e.Reason, e.Detail))
		}
	}
	for _, dl := range c.Deliverables {
		if _, declared := delivered[dl.Path]; !declared {
			n++
			failures = append(failures, fmt.Sprintf("deliverable %s is not declared: claim it with claim_outputs, then write it", dl.Path))
		}
	}
	if len(c.Deliverables) > 0 {
		for _, f := range check.Deliverables(c, p.Env.Outputs, p.Env.Inputs) {
			n++
			if !f.OK {
				failures = append(failures, fmt.Sprintf("check %s %s: %s", f.Constraint, f.Path, f.Detail))
			}
		}
	}
	var align []contract.Clause
	for _, cl := range c.Verify {
		if cl.Kind == contract.KindSourceAlignment {
			align = append(align, cl)
		}
	}
	for _, r := range verify.RunAll(ctx, p.Env, align) {
		n++
		if r.Passed {
			continue
		}
		probs := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if r.Stdout == "" {
			probs = []string{r.Detail}
		}
		for _, pr := range probs {
			failures = append(failures, fmt.Sprintf("verification %s: %s", r.Label(), pr))
		}
	}
	k, kf := p.claimCitations(c, d)
	return n + k, append(failures, kf...)
}

// claimRef is a [K3] or [K3, K4] citation.
var claimRef = regexp.MustCompile(`\[(K[0-9]+(?:\s*[,;]\s*K[0-9]+)*)\]`)

// claimCitations checks the [K3] citations of the deliverables (the
// contract's, else the declared paths) against the claim ledger: each
// must name a claim, and not a refuted one. A run without claims has none
// to check.
func (p *Precheck) claimCitations(c *contract.Contract, d publish.Delivery) (int, []string) {
	if p.Log == nil || !p.Team {
		return 0, nil
	}
	rc, err := record.Read(p.Log.Dir())
	if err != nil {
		return 0, nil
	}
	l := claims.Fold(rc.Events)
	if len(l.Claims) == 0 {
		return 0, nil
	}
	var paths []string
	for _, dl := range c.Deliverables {
		paths = append(paths, dl.Path)
	}
	if len(paths) == 0 {
		for _, e := range d.Entries {
			paths = append(paths, e.Path)
		}
	}
	n := 0
	var failures []string
	for _, pp := range paths {
		f, err := os.Open(filepath.Join(p.Env.Outputs, filepath.FromSlash(strings.TrimPrefix(pp, "/outputs/"))))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for line := 1; sc.Scan(); line++ {
			for _, m := range claimRef.FindAllStringSubmatch(sc.Text(), -1) {
				for _, id := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
					n++
					k, ok := l.Get(id)
					switch {
					case !ok:
						failures = append(failures, fmt.Sprintf("%s:%d: cites %s, which is no claim of the ledger (K1 to K%d)", pp, line, id, len(l.Claims)))
					case k.Status == claims.Refuted:
						failures = append(failures, fmt.Sprintf("%s:%d: cites refuted claim %s as support (%s)", pp, line, id, k.Why))
					}
				}
			}
		}
		f.Close()
	}
	return n, failures
}

// render is the failures as the agent reads them.
func renderPrecheck(n int, failures []string) string {
	if n == 0 {
		return "nothing to check: the contract declares no deliverable and nothing was claimed with claim_outputs"
	}
	if len(failures) == 0 {
		return fmt.Sprintf("all %d cheap checks pass (delivery, deliverable checks, source alignment, claim citations); the final gate also runs the contract's other clauses", n)
	}
	return fmt.Sprintf("%d failure(s) in %d cheap checks; fix each, then check again:\n- %s", len(failures), n, strings.Join(failures, "\n- "))
}

// CheckDeliverables names the precheck's tool.
const CheckDeliverables = "check_deliverables"

// Tool is check_deliverables.
func (p *Precheck) Tool() tool.Tool {
	return tool.Define(CheckDeliverables, "Check the deliverables as they stand, as the final gate will: delivery, the contract's deliverable checks, source alignment ([E7] ids exist, each quote is in the evidence of the citation after it) and [K3] citations. Returns each failure with its file:line. Cheap: no sandbox, no model.", 0,
		func(ctx context.Context, _ struct{}) tool.Result {
			n, failures := p.run(ctx)
			p.Log.Append(record.TypePrecheck, "", record.Precheck{Trigger: record.PrecheckTool, Checks: n, Failures: failures})
			return tool.Result{Output: renderPrecheck(n, failures)}
		})
}

// Gate wraps the agent's finish gate: once next accepts, the first finish
// whose deliverables fail the cheap checks or the final gate's costly
// clauses is refused with the failures; every later one is accepted (the
// final gate decides).
func (p *Precheck) Gate(ctx context.Context, next func(string) error) func(string) error {
	return func(summary string) error {
		if next != nil {
			if err := next(summary); err != nil {
				return err
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.Repaired {
			return nil
		}
		n, failures := p.run(ctx)
		c := p.Ctl.Current()
		if c == nil {
			c = &contract.Contract{}
		}
		m, ff := p.runFinal(ctx, c)
		n, failures = n+m, append(failures, ff...)
		if len(failures) == 0 {
			return nil
		}
		p.Repaired = true
		p.Log.Append(record.TypePrecheck, "", record.Precheck{Trigger: record.PrecheckFinish, Checks: n, Clauses: m, Failures: failures, Refused: true})
		return fmt.Errorf("the final gate would fail: %s\nThis is your one repair turn: fix these, check with check_deliverables, then finish again (the next finish goes to the final gate as it is)", renderPrecheck(n, failures))
	}
}

// RepairGiven reports whether a resumed run's agent already had its repair
// turn.
func RepairGiven(events []record.Event) bool {
	for _, e := range events {
		p, _ := record.DecodePayload(e)
		if pc, ok := p.(*record.Precheck); ok && pc.Refused {
			return true
		}
	}
	return false
}
