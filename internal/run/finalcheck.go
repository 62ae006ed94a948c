package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/verify"
	"github.com/apodex/apodex/internal/workspace"
)

// The repair turn covers the final gate's costly clauses too (issue 26
// item 6): at the first finish, besides the cheap checks, the contract's
// tests, recompute and rubric clauses run as the final gate would run
// them, so a deliverable that fails its hidden tests or its rubric is
// refused once with the failures instead of ending the run. Their results
// are kept with a digest of /outputs and /workspace: when the planes have
// not changed by the time the run concludes, the final gate takes them
// instead of running the clauses (and the rubric's judge) a second time.

// finalClauses are the contract's clauses the cheap checks leave to the
// final gate: tests and recompute (a sandbox each) and rubric (a judge).
// Human clauses await review whatever the agent does and are left out.
func finalClauses(c *contract.Contract) []contract.Clause {
	var out []contract.Clause
	for _, cl := range c.Verify {
		if cl.Kind != contract.KindSourceAlignment && cl.Kind != contract.KindHuman {
			out = append(out, cl)
		}
	}
	return out
}

// finalCheck is what the final gate's clauses said at a finish, on planes
// whose digest was sum.
type finalCheck struct {
	sum     string
	clauses []contract.Clause
	results []verify.Result
}

// result is the kept result of clause cl when the planes' digest is still
// sum.
func (f *finalCheck) result(cl contract.Clause, sum string) (verify.Result, bool) {
	if f == nil || f.sum != sum {
		return verify.Result{}, false
	}
	for i, k := range f.clauses {
		if reflect.DeepEqual(k, cl) {
			return f.results[i], true
		}
	}
	return verify.Result{}, false
}

// runFinal runs the final gate's costly clauses on the planes as they
// stand and keeps their results; it returns how many ran and the failures,
// worded as the final gate words them.
func (p *precheck) runFinal(ctx context.Context, c *contract.Contract) (int, []string) {
	cls := finalClauses(c)
	if len(cls) == 0 || p.final == nil {
		return 0, nil
	}
	env := *p.final
	env.Deliverables = deliverablePaths(c) // the contract in force now
	runner, err := verifierSandbox(p.sandboxKind)
	if err != nil && verify.NeedsSandbox(cls) {
		return 1, []string{"verification: cannot run the verifier without a sandbox: " + err.Error()}
	}
	env.Runner = runner
	sum := planesSum(env.Outputs, env.Workspace)
	res := verify.RunAll(ctx, env, cls)
	p.last = &finalCheck{sum: sum, clauses: cls, results: res}
	var failures []string
	for _, r := range res {
		if !r.Passed && !r.Pending {
			failures = append(failures, fmt.Sprintf("verification %s: %s", r.Label(), r.Detail))
		}
	}
	return len(res), failures
}

// kept is the final check a finish made, for conclude (nil: none).
func (p *precheck) kept() *finalCheck {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// runClauses runs the verification clauses for the final gate, taking a
// clause's result from prior when it ran on planes with the same digest.
func runClauses(ctx context.Context, env verify.Env, clauses []contract.Clause, prior *finalCheck) []verify.Result {
	if prior == nil {
		return verify.RunAll(ctx, env, clauses)
	}
	sum := planesSum(env.Outputs, env.Workspace)
	out := make([]verify.Result, 0, len(clauses))
	for _, cl := range clauses {
		if r, ok := prior.result(cl, sum); ok {
			out = append(out, r)
			continue
		}
		out = append(out, verify.Run(ctx, env, cl))
	}
	return out
}

// planesSum is a digest of the directories' files: each regular file's
// path and content, each symbolic link's target; "" when one cannot be
// read (so nothing is reused).
func planesSum(dirs ...string) string {
	h := sha256.New()
	for _, dir := range dirs {
		fmt.Fprintf(h, "dir %s\n", dir)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			switch {
			case d.Type().IsRegular():
				sum, _, err := workspace.HashFile(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "f %q %s\n", rel, sum)
			case d.Type()&fs.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				fmt.Fprintf(h, "l %q %q\n", rel, target)
			case d.IsDir():
				fmt.Fprintf(h, "d %q\n", rel)
			}
			return nil
		})
		if err != nil {
			return ""
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
