package jetstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
)

// TestWorkersOfAQueueShareItsLeaseTTL: the lease TTL is the queue's. A
// connection without one takes the queue's; another one is refused,
// naming both and the live workers, while a worker runs; once none does,
// it becomes the queue's (ack wait and lease bucket).
func TestWorkersOfAQueueShareItsLeaseTTL(t *testing.T) {
	s := embedded(t)
	ctx := context.Background()
	a := connect(t, s.URL(), 4*time.Second)
	w := &Worker{Conn: a, Name: "a", Version: "v", Options: eval.Options{Home: t.TempDir(), Sandbox: "none"}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for deadline := time.Now().Add(30 * time.Second); !slices.Contains(liveWorkers(ctx, a.js), "a"); {
		if time.Now().After(deadline) {
			t.Fatal("worker a has no heartbeat")
		}
		time.Sleep(50 * time.Millisecond)
	}

	_, err := Connect(ctx, s.URL(), "b", 9*time.Second)
	if !errors.Is(err, ErrLeaseTTL) || !strings.Contains(err.Error(), "4s") || !strings.Contains(err.Error(), "9s") || !strings.Contains(err.Error(), "(a)") {
		t.Fatalf("a worker asking 9s of a 4s queue with worker a live: %v; want ErrLeaseTTL naming both and a", err)
	}
	if b := connect(t, s.URL(), 0); b.LeaseTTL != 4*time.Second {
		t.Fatalf("a connection without a TTL has %s, want the queue's 4s", b.LeaseTTL)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := connect(t, s.URL(), 9*time.Second); c.LeaseTTL != 9*time.Second {
		t.Fatalf("with no live worker: TTL %s, want 9s", c.LeaseTTL)
	}
	d := connect(t, s.URL(), 0)
	st, err := d.leases.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.LeaseTTL != 9*time.Second || st.TTL() != 9*time.Second {
		t.Fatalf("the queue after the change: ack wait %s, lease bucket TTL %s; want 9s each", d.LeaseTTL, st.TTL())
	}
}
