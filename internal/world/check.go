package world

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/verify"
)

// Verdict is the task verifier's judgement of one end state.
type Verdict struct {
	Passed   bool            `json:"passed"`
	Failures []string        `json:"failures,omitempty"`
	Checks   []check.Finding `json:"checks,omitempty"`
	Verify   []verify.Result `json:"verification,omitempty"`
}

// CheckReport is `apodex worlds check`: the world is usable when OK.
type CheckReport struct {
	ID       string   `json:"id"`
	OK       bool     `json:"ok"`
	Intact   bool     `json:"intact"`
	Problems []string `json:"problems,omitempty"`
	Solution Verdict  `json:"solution"`
	Empty    Verdict  `json:"empty"`
}

// Check rehashes w and runs its verifier twice, on the reference solution
// and on an empty delivery, with runner (nil: bwrap). Every problem is
// reported, none returned as an error.
func Check(ctx context.Context, w *World, runner sandbox.Runner) CheckReport {
	rep := CheckReport{ID: w.ID}
	problem := func(format string, a ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, a...)) }
	if err := w.Rehash(); err != nil {
		problem("%v", err)
	} else {
		rep.Intact = true
	}
	c, err := w.Contract()
	if err != nil {
		problem("the stored task does not load: %v", err)
		return rep
	}
	if runner == nil && len(c.Verify) > 0 {
		if runner, err = sandbox.New(sandbox.KindAuto); err != nil {
			problem("no sandbox to run the verifier in: %v", err)
			return rep
		}
	}
	tmp, err := os.MkdirTemp("", "apodex-check-")
	if err != nil {
		problem("%v", err)
		return rep
	}
	defer os.RemoveAll(tmp)
	var judge = func(name string, solved bool) Verdict {
		base := filepath.Join(tmp, name)
		in, ws, out := filepath.Join(base, "inputs"), filepath.Join(base, "workspace"), filepath.Join(base, "outputs")
		for _, d := range []string{in, ws, out} {
			os.MkdirAll(d, 0o755)
		}
		var v Verdict
		if _, err := LinkInputs(w, in); err != nil {
			v.Failures = append(v.Failures, err.Error())
			return v
		}
		if err := copyTreeInto(w.Workspace(), ws); err != nil {
			v.Failures = append(v.Failures, err.Error())
			return v
		}
		if solved {
			for plane, dst := range map[string]string{"outputs": out, "workspace": ws} {
				if err := copyTreeInto(filepath.Join(w.Solution(), plane), dst); err != nil {
					v.Failures = append(v.Failures, err.Error())
					return v
				}
			}
		}
		return Judge(ctx, c, verify.Env{Runner: runner, Inputs: in, Workspace: ws, Outputs: out})
	}
	rep.Solution = judge("solution", true)
	rep.Empty = judge("empty", false)
	if !rep.Solution.Passed {
		problem("the reference solution fails its verifier: %v", rep.Solution.Failures)
	}
	if rep.Empty.Passed {
		problem("an empty delivery passes the verifier: the world tests nothing")
	}
	rep.OK = len(rep.Problems) == 0
	return rep
}

// Judge runs c's deliverable checks and verification clauses on an end
// state, as a run's final gate does.
func Judge(ctx context.Context, c *contract.Contract, env verify.Env) Verdict {
	v := Verdict{Passed: true}
	v.Checks = check.Deliverables(c, env.Outputs, env.Inputs)
	for _, f := range v.Checks {
		if !f.OK {
			v.Passed = false
			v.Failures = append(v.Failures, fmt.Sprintf("%s %s: %s", f.Path, f.Constraint, f.Detail))
		}
	}
	if len(c.Verify) > 0 {
		v.Verify = verify.RunAll(ctx, env, c.Verify)
		for _, r := range v.Verify {
			if !r.Passed {
				v.Passed = false
				v.Failures = append(v.Failures, r.Label()+": "+r.Detail)
			}
		}
	}
	return v
}
