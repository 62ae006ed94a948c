package trajectory

import (
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// TestContinuedRunConcludesByItsLastSegment: a run whose first segment
// failed its gate and whose continued segment passed is verified, with
// the last run_finished's status.
func TestContinuedRunConcludesByItsLastSegment(t *testing.T) {
	r := runOf(t,
		ev{record.TypeVerification, "", record.Verification{Passed: false}},
		ev{record.TypeRunFinished, "", record.RunFinished{Status: "failed", Termination: "gate_failed", Failures: []string{"verification 1"}}},
		ev{record.TypeResumed, "", record.Resumed{AfterSeq: 3, FollowUp: "fix it"}},
		ev{record.TypeVerification, "", record.Verification{Passed: true}},
		ev{record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "completed"}},
	)
	if r.Status != "completed" || !r.Verified {
		t.Fatalf("status %s, verified %v", r.Status, r.Verified)
	}
}
