package run

import (
	"context"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/run/gate"
)

// settle puts the final gate's verdict (package gate) in the summary and
// sets its status: completed only when the agent finished and every check
// held; an agent that finished but failed a check ends gate_failed.
func settle(s *Summary, v gate.Verdict) {
	s.Delivery, s.Checks, s.Verify, s.Failures = v.Delivery, v.Checks, v.Verify, v.Failures
	s.Status = StatusFailed
	switch {
	case stoppedEnd(s.Termination):
		s.Status = StatusStopped // resumable: apodex resume goes on
	case s.Termination != string(agent.Completed):
	case len(v.Failures) > 0:
		s.Termination = string(agent.GateFailed)
		if s.Error == "" {
			s.Error = "the final gate failed: " + strings.Join(v.Failures, "; ")
		}
	case v.Pending:
		s.Status = StatusAwaitingReview
	default:
		s.Status = StatusCompleted
	}
}

// taskMessage is the agent's first user message: the objective and, under
// a contract, the deliverables it must claim and write.
func taskMessage(c *contract.Contract) string {
	if len(c.Deliverables) == 0 {
		return c.Objective
	}
	return c.Objective + "\n\n" + c.Describe()
}

// Reverification is `apodex verify RUN` (gate.Reverification).
type Reverification = gate.Reverification

// Reverify reruns the task verifier of the finished run in dir
// (gate.Reverify).
func Reverify(ctx context.Context, dir string) (Reverification, error) {
	return gate.Reverify(ctx, dir)
}
