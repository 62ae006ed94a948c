package gate

import (
	"context"
	"fmt"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/verify"
)

// The repair turn covers the final gate's costly clauses too (issue 26
// item 6): at the first finish, besides the cheap checks, the contract's
// tests, recompute and rubric clauses run as the final gate would run
// them, so a deliverable that fails its hidden tests or its rubric is
// refused once with the failures instead of ending the run. Their results
// are kept with a digest of /outputs and /workspace: when the planes have
// not changed by the time the run concludes, the final gate takes them
// instead of running the clauses (and the rubric's judge) a second time.

// runFinal runs the final gate's costly clauses on the planes as they
// stand and keeps their results; it returns how many ran and the failures,
// worded as the final gate words them.
func (p *Precheck) runFinal(ctx context.Context, c *contract.Contract) (int, []string) {
	cls := verify.Costly(c)
	if len(cls) == 0 || p.Final == nil {
		return 0, nil
	}
	env := *p.Final
	env.Deliverables = Deliverables(c) // the contract in force now
	runner, err := Sandbox(p.SandboxKind)
	if err != nil && verify.NeedsSandbox(cls) {
		return 1, []string{"verification: cannot run the verifier without a sandbox: " + err.Error()}
	}
	env.Runner = runner
	sum := verify.PlanesSum(env.Outputs, env.Workspace)
	res := verify.RunAll(ctx, env, cls)
	p.last = &verify.Kept{Sum: sum, Clauses: cls, Results: res}
	var failures []string
	for _, r := range res {
		if !r.Passed && !r.Pending {
			failures = append(failures, fmt.Sprintf("verification %s: %s", r.Label(), r.Detail))
		}
	}
	return len(res), failures
}

// Kept is the final check a finish made, for Conclude (nil: none).
func (p *Precheck) Kept() *verify.Kept {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Deliverables are the contract's deliverables, for a rubric's judge.
func Deliverables(c *contract.Contract) []string {
	var out []string
	if c != nil {
		for _, d := range c.Deliverables {
			out = append(out, d.Path)
		}
	}
	return out
}
