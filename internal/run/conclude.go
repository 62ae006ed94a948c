package run

import (
	"context"
	"fmt"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/verify"
)

// conclude reconciles the delivery and, under a contract, checks the
// deliverables and runs the verification clauses in fresh sandboxes of the
// run's kind (verifierSandbox). It sets
// the summary's status: completed only when the agent finished and every
// check held; an agent that finished but failed a check ends gate_failed.
// refused are failures found before it (a world changed in the store).
// prior, when set, holds clause results of the agent's finish that still
// hold if the planes did not change since (finalcheck.go).
func conclude(ctx context.Context, s *Summary, refused []string, c *contract.Contract, plane *publish.Plane, log *record.Log, env verify.Env, prior *verify.Kept) {
	d := plane.Reconcile()
	claimed := len(d.Entries) > 0
	if claimed || len(c.Deliverables) > 0 {
		s.Delivery = &d
		log.Append(record.TypeDelivery, "", d)
	}
	failures := refused
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
		s.Checks = check.Deliverables(c, env.Outputs, env.Inputs)
		for _, f := range s.Checks {
			log.Append(record.TypeVerification, "", record.Verification{Check: f.Constraint, Path: f.Path, Passed: f.OK, Detail: f.Detail})
			if !f.OK {
				failures = append(failures, fmt.Sprintf("check %s %s: %s", f.Constraint, f.Path, f.Detail))
			}
		}
	}
	if len(c.Verify) > 0 {
		runner, err := verifierSandbox(s.Sandbox)
		if err != nil && verify.NeedsSandbox(c.Verify) {
			failures = append(failures, "verification: cannot run the verifier without a sandbox: "+err.Error())
		} else {
			env.Runner = runner
			s.Verify = verify.RunKept(ctx, env, c.Verify, prior)
			for _, r := range s.Verify {
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
	s.Failures = failures
	s.Status = StatusFailed
	switch {
	case stoppedEnd(s.Termination):
		s.Status = StatusStopped // resumable: apodex resume goes on
	case s.Termination != string(agent.Completed):
	case len(failures) > 0:
		s.Termination = string(agent.GateFailed)
		if s.Error == "" {
			s.Error = "the final gate failed: " + strings.Join(failures, "; ")
		}
	case pending:
		s.Status = StatusAwaitingReview
	default:
		s.Status = StatusCompleted
	}
}

// verificationOf is a verifier clause's result as recorded.
func verificationOf(r verify.Result) record.Verification {
	return record.Verification{Index: r.Index, Name: r.Name, Kind: r.Kind, Command: r.Command, Passed: r.Passed,
		Detail: r.Detail, ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr, DurationMS: r.DurationMS,
		MustPass: r.MustPass, Scores: r.Scores, Pending: r.Pending}
}

// taskMessage is the agent's first user message: the objective and, under
// a contract, the deliverables it must claim and write.
func taskMessage(c *contract.Contract) string {
	if len(c.Deliverables) == 0 {
		return c.Objective
	}
	return c.Objective + "\n\n" + c.Describe()
}
