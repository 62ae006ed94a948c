package gate

import (
	"context"
	"fmt"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/verify"
)

// Verdict is the final gate's: the delivery (nil when nothing was claimed
// and the contract declares no deliverable), the deliverable checks, the
// verification clauses' results and the failures, each worded for the
// user; Pending: a human clause awaits review.
type Verdict struct {
	Delivery *publish.Delivery
	Checks   []check.Finding
	Verify   []verify.Result
	Failures []string
	Pending  bool
}

// Conclude reconciles the delivery and, under a contract, checks the
// deliverables and runs the verification clauses in fresh sandboxes of the
// run's kind (Sandbox), recording each result. prior, when set, holds
// clause results of the agent's finish that still hold if the planes did
// not change since (finalcheck.go).
func Conclude(ctx context.Context, c *contract.Contract, plane *publish.Plane, log *record.Log, env verify.Env, sandboxKind string, prior *verify.Kept) Verdict {
	var v Verdict
	d := plane.Reconcile()
	claimed := len(d.Entries) > 0
	if claimed || len(c.Deliverables) > 0 {
		v.Delivery = &d
		log.Append(record.TypeDelivery, "", d)
	}
	var failures []string
	pending := false // a human clause awaits review
	if claimed && !d.OK {
		for _, e := range d.Entries {
			if e.Status != publish.Delivered {
				failures = append(failures, fmt.Sprintf("delivery: %s %s (%s)", e.Path, e.Reason, e.Detail))
			}
		}
	}
	if len(c.Deliverables) > 0 {
		delivered := map[string]bool{}
		for _, e := range d.Entries {
			delivered[e.Path] = e.Status == publish.Delivered
		}
		for _, dl := range c.Deliverables {
			if !delivered[dl.Path] {
				failures = append(failures, fmt.Sprintf("deliverable %s was not delivered (declare it with claim_outputs, then write it)", dl.Path))
			}
		}
		v.Checks = check.Deliverables(c, env.Outputs, env.Inputs)
		for _, f := range v.Checks {
			log.Append(record.TypeVerification, "", record.Verification{Check: f.Constraint, Path: f.Path, Passed: f.OK, Detail: f.Detail})
			if !f.OK {
				failures = append(failures, fmt.Sprintf("check %s %s: %s", f.Constraint, f.Path, f.Detail))
			}
		}
	}
	if len(c.Verify) > 0 {
		runner, err := Sandbox(sandboxKind)
		if err != nil && verify.NeedsSandbox(c.Verify) {
			failures = append(failures, "verification: cannot run the verifier without a sandbox: "+err.Error())
		} else {
			env.Runner = runner
			v.Verify = verify.RunKept(ctx, env, c.Verify, prior)
			for _, r := range v.Verify {
				log.Append(record.TypeVerification, "", verificationOf(r))
				if r.Pending {
					pending = true
					continue
				}
				if !r.Passed {
					failures = append(failures, fmt.Sprintf("verification %s: %s", r.Label(), r.Detail))
				}
			}
		}
	}
	v.Failures, v.Pending = failures, pending
	return v
}

// verificationOf is a verifier clause's result as recorded.
func verificationOf(r verify.Result) record.Verification {
	return record.Verification{Index: r.Index, Name: r.Name, Kind: r.Kind, Command: r.Command, Passed: r.Passed,
		Detail: r.Detail, ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr, DurationMS: r.DurationMS,
		MustPass: r.MustPass, Scores: r.Scores, Pending: r.Pending}
}
