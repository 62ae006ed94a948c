package team_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/team"
)

// The lead's wait times out on the team's clock: with a fake clock the
// 15 s wait ends when the test moves the clock, not 15 s later.
func TestWaitTimesOutOnTheTeamClock(t *testing.T) {
	h := newHarness(t)
	clk := runtest.Clock()
	lead := steps(
		calls(add("slow", "never ends"), dispatch("T1", "worker")),
		calls(wait("A1")),
		calls(call("board_cancel", map[string]any{"id": "T1", "reason": "too slow"})),
		calls(finish("gave up on T1")),
	)
	sm := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead}))
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		if req.Agent == "A1" {
			<-ctx.Done() // works until it is cancelled
			return nil, context.Cause(ctx)
		}
		return sm.Generate(ctx, req)
	})
	done := make(chan struct{})
	defer close(done)
	go func() {
		if clk.WaitTimers(1, done) { // the wait's timer: the only one
			clk.Advance(15 * time.Second)
		}
	}()
	out := h.run(model, func(c *team.Config) { c.Clock = clk })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	if r := h.nth("lead", "wait", 0); !strings.Contains(r.Output, "no assignment ended within 15s") {
		t.Errorf("the wait did not time out: %q", r.Output)
	}
}
