package team_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/team"
)

// handshake is a model on which subagent A1's first request is held until
// A2's first request is in flight. If subagents ran one after another, A2
// could never start while A1 is held: A1 gives up after the safety timeout
// and the handshake is recorded as missed (no test deadlocks forever).
type handshake struct {
	model  llm.Model
	safety time.Duration

	once sync.Once
	a2   chan struct{} // closed when A2's first request arrives
	mu   sync.Mutex
	met  bool
	done bool
}

func newHandshake(safety time.Duration) *handshake {
	hs := &handshake{safety: safety, a2: make(chan struct{})}
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch {
		case turn == 0:
			return calls(add("Left", "Report on the left half"), add("Right", "Report on the right half"),
				dispatch("T1", "left reporter", "read_file"), dispatch("T2", "right reporter", "read_file")), nil
		case !seen(req, "Assignment A1 (") || !seen(req, "Assignment A2 ("):
			return calls(wait()), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1"), resolve("T2", "report:A2")), nil
		}
		return calls(finish("both halves reported")), nil
	}
	sub := func(turn int, req *llm.Request) (*llm.Response, error) {
		return calls(report(req.Agent + " is done")), nil
	}
	sm := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "*": sub}))
	hs.model = llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		switch {
		case req.Agent == "A2" && req.Turn == 0:
			hs.once.Do(func() { close(hs.a2) })
		case req.Agent == "A1" && req.Turn == 0:
			timer := time.NewTimer(hs.safety)
			defer timer.Stop()
			met := false
			select {
			case <-hs.a2:
				met = true
			case <-timer.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			hs.mu.Lock()
			hs.met, hs.done = met, true
			hs.mu.Unlock()
		}
		return sm.Generate(ctx, req)
	})
	return hs
}

func (hs *handshake) result() (met, done bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.met, hs.done
}

// TestSubagentsRunConcurrently proves real concurrency without timing: A1's
// first model call does not return until A2's first model call is in
// flight, which only happens if both subagents run at once.
func TestSubagentsRunConcurrently(t *testing.T) {
	h := newHarness(t)
	hs := newHandshake(10 * time.Second)
	out := h.run(hs.model, func(c *team.Config) { c.Concurrency = 2 })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	if met, done := hs.result(); !done || !met {
		t.Fatalf("A2's first request never arrived while A1's was held (held: %v): the subagents did not run concurrently", done)
	}
	// The record shows it too: A2 was running before A1 reported.
	if r2, e1 := h.stateSeq("A2", team.Running), h.stateSeq("A1", team.Reported); r2 > e1 {
		t.Errorf("A2 started running (seq %d) after A1 reported (seq %d)", r2, e1)
	}
	for _, id := range []string{"A1", "A2"} {
		wantLifecycle(t, h, id, team.Created, team.Queued, team.Running, team.Reported)
	}
}

// TestConcurrencyOneSerializes: with Concurrency 1 the second assignment
// waits in the queue and starts only after the first ended. The same
// handshake is missed, which shows the concurrency test above would fail
// (not hang) if subagents ran one after another.
func TestConcurrencyOneSerializes(t *testing.T) {
	h := newHarness(t)
	hs := newHandshake(300 * time.Millisecond)
	out := h.run(hs.model, func(c *team.Config) { c.Concurrency = 1 })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	if met, done := hs.result(); !done || met {
		t.Errorf("handshake met=%v held=%v; with one slot A2 must not start while A1 runs", met, done)
	}
	q2, r1, e1, r2 := h.stateSeq("A2", team.Queued), h.stateSeq("A1", team.Running), h.stateSeq("A1", team.Reported), h.stateSeq("A2", team.Running)
	if !(q2 < e1 && r1 < e1 && e1 < r2) {
		t.Errorf("record order: A2 queued %d, A1 running %d, A1 reported %d, A2 running %d; want A2 queued while A1 ran, and running only after A1 reported", q2, r1, e1, r2)
	}
	for _, id := range []string{"A1", "A2"} {
		wantLifecycle(t, h, id, team.Created, team.Queued, team.Running, team.Reported)
	}
}
