package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
)

// TestLostRepliesKeepAFinishedRunCounted: the reply to a worker's commit
// of its lease and the ack of its result are lost (a node dies between
// acting and answering); the tries again are refused (the entry and the
// subject hold what the lost tries wrote), and the worker still counts
// them as its own: the commit holds, the result is published once and
// the run is not called abandoned. Another result for the rollout is
// still refused.
func TestLostRepliesKeepAFinishedRunCounted(t *testing.T) {
	s := embedded(t)
	p := newNATSProxy(t, s.URL())
	var mu sync.Mutex
	lose := map[string]int{} // subject prefix -> replies still to lose
	p.loseReply = func(subject string) bool {
		mu.Lock()
		defer mu.Unlock()
		for prefix, n := range lose {
			if n > 0 && strings.HasPrefix(subject, prefix) {
				lose[prefix] = n - 1
				return true
			}
		}
		return false
	}
	c := connect(t, p.url(), 5*time.Second)
	j := eval.Job{Eval: "e-lost", World: eval.PlanWorld{ID: "w-1"}, Config: eval.Config{Name: "c"}, Rollout: 0}
	ctx := context.Background()
	lease, err := c.Acquire(ctx, j, "w")
	if err != nil {
		t.Fatal(err)
	}
	first := lease.Token
	mu.Lock()
	lose["$KV."+LeaseBucket+"."] = 1
	lose[resultSubject] = 1
	mu.Unlock()

	if err := lease.Commit(ctx); err != nil {
		t.Fatalf("commit whose first reply was lost: %v", err)
	}
	e, err := c.leases.Get(ctx, leaseKey(j))
	if err != nil || lease.Token != e.Revision() || lease.Token == first || !strings.Contains(string(e.Value()), `"done"`) {
		t.Fatalf("lease after the commit: token %d, entry %v (%v); want the entry's revision, state done", lease.Token, e, err)
	}
	raw, _ := json.Marshal(Outcome{Result: eval.Result{World: "w-1", Config: "c", Status: "completed"}, Worker: "w", Token: lease.Token})
	if err := c.publishResult(ctx, resultSubjectOf(j), raw); err != nil {
		t.Fatalf("result whose first ack was lost: %v", err)
	}
	if n := resultCount(t, c); n != 1 {
		t.Fatalf("%d result messages, want 1", n)
	}
	mu.Lock()
	for k, n := range lose {
		if n != 0 {
			t.Errorf("the reply to %s was not lost: the test did not play the fault", k)
		}
	}
	mu.Unlock()
	other, _ := json.Marshal(Outcome{Result: eval.Result{World: "w-1", Config: "c", Status: "completed"}, Worker: "x"})
	if err := c.publishResult(ctx, resultSubjectOf(j), other); !isWrongLastSeq(err) {
		t.Fatalf("a second, different result: %v; want refused", err)
	}
	if err := (&Lease{c: c, key: leaseKey(j), val: leaseValue{Worker: "x", State: "done"}, Token: first}).Commit(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("a commit under the old token: %v; want ErrFenced", err)
	}
}
