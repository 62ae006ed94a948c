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

// handshake is a model on which the first subagent's first request is held
// until the other subagent's first request is in flight. If subagents ran
// one after another, the second could never start while the first is held:
// the first gives up after the safety timeout and the handshake is recorded
// as missed (no test deadlocks forever).
type handshake struct {
	model  llm.Model
	safety time.Duration

	second chan struct{} // closed when the second subagent's first request arrives
	mu     sync.Mutex
	first  string // the subagent that called first
	met    bool
	done   bool
}

func newHandshake(safety time.Duration) *handshake {
	hs := &handshake{safety: safety, second: make(chan struct{})}
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
		if req.Agent == "lead" || req.Turn != 0 {
			return sm.Generate(ctx, req)
		}
		hs.mu.Lock()
		first := hs.first == ""
		if first {
			hs.first = req.Agent
		} else {
			close(hs.second)
		}
		hs.mu.Unlock()
		if first {
			timer := time.NewTimer(hs.safety)
			defer timer.Stop()
			met := false
			select {
			case <-hs.second:
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

func (hs *handshake) result() (met, done bool, first, second string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	second = "A2"
	if hs.first == "A2" {
		second = "A1"
	}
	return hs.met, hs.done, hs.first, second
}

// TestSubagentsRunConcurrently proves real concurrency without timing: the
// first subagent's first model call does not return until the other's
// first model call is in flight, which only happens if both run at once.
func TestSubagentsRunConcurrently(t *testing.T) {
	h := newHarness(t)
	hs := newHandshake(10 * time.Second)
	out := h.run(hs.model, func(c *team.Config) { c.Concurrency = 2 })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	met, done, first, second := hs.result()
	if !done || !met {
		t.Fatalf("%s's first request never arrived while %s's was held (held: %v): the subagents did not run concurrently", second, first, done)
	}
	// The record shows it too: the second was running before the first reported.
	if r2, e1 := h.stateSeq(second, team.Running), h.stateSeq(first, team.Reported); r2 > e1 {
		t.Errorf("%s started running (seq %d) after %s reported (seq %d)", second, r2, first, e1)
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
	met, done, first, second := hs.result()
	if !done || met {
		t.Errorf("handshake met=%v held=%v; with one slot %s must not start while %s runs", met, done, second, first)
	}
	q2, r1, e1, r2 := h.stateSeq(second, team.Queued), h.stateSeq(first, team.Running), h.stateSeq(first, team.Reported), h.stateSeq(second, team.Running)
	if !(q2 < e1 && r1 < e1 && e1 < r2) {
		t.Errorf("record order: %[5]s queued %[1]d, %[6]s running %[2]d, %[6]s reported %[3]d, %[5]s running %[4]d; want %[5]s queued while %[6]s ran, and running only after it reported",
			q2, r1, e1, r2, second, first)
	}
	for _, id := range []string{"A1", "A2"} {
		wantLifecycle(t, h, id, team.Created, team.Queued, team.Running, team.Reported)
	}
}
