package trajectory

import (
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// TestContinuedRunConcludesByItsLastSegment: a run whose first segment
// failed its gate and whose continued segment passed is verified, with
// the last run_finished's status.
func TestContinuedRunConcludesByItsLastSegment(t *testing.T) {
	dir := t.TempDir()
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		typ string
		p   any
	}{
		{record.TypeRunStarted, record.RunStarted{RunID: "r"}},
		{record.TypeVerification, record.Verification{Passed: false}},
		{record.TypeRunFinished, record.RunFinished{Status: "failed", Termination: "gate_failed", Failures: []string{"verification 1"}}},
		{record.TypeResumed, record.Resumed{AfterSeq: 3, FollowUp: "fix it"}},
		{record.TypeVerification, record.Verification{Passed: true}},
		{record.TypeRunFinished, record.RunFinished{Status: "completed", Termination: "completed"}},
	} {
		if _, err := l.Append(e.typ, "", e.p); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || !r.Verified {
		t.Fatalf("status %s, verified %v", r.Status, r.Verified)
	}
}
