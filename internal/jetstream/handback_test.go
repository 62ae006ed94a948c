package jetstream

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// TestStoppedWorkerHandsBackAndOtherVersionRefuses: a worker of another
// Apodex version leaves the rollout queued; a worker stopped gracefully
// mid-rollout hands it back (nak, lease released), so the next worker
// scores it well before the lease TTL, and the stopped worker's run is
// marked abandoned.
func TestStoppedWorkerHandsBackAndOtherVersionRefuses(t *testing.T) {
	s := embedded(t)
	ttl := time.Minute // far longer than the test: only a hand-back lets b have it
	c := connect(t, s.URL(), ttl)
	home, plan := prepared(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	j := eval.Pending(plan, nil, "v1")[0]
	if _, err := c.Publish(ctx, []eval.Job{j}); err != nil {
		t.Fatal(err)
	}
	oracle := func(_ eval.Config, w *world.World) (llm.Model, record.ModelSettings, error) { return eval.Oracle(w) }
	run := func(w *Worker) (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		return func() { cancel(); <-done }
	}

	old := &Worker{Conn: connect(t, s.URL(), ttl), Name: "old", Version: "v0", Options: eval.Options{Home: t.TempDir(), Sandbox: sandboxKind(), NewModel: oracle}}
	stopOld := run(old)
	time.Sleep(1500 * time.Millisecond)
	stopOld()
	if ok, _ := c.Scored(ctx, j); ok {
		t.Fatal("a worker of another version ran the rollout")
	}
	if runs, _ := os.ReadDir(filepath.Join(old.Options.Home, "runs")); len(runs) != 0 {
		t.Fatalf("a worker of another version started %d runs", len(runs))
	}

	block := &blocker{started: make(chan struct{})}
	aHome := t.TempDir()
	a := &Worker{Conn: connect(t, s.URL(), ttl), Name: "a", Version: "v1", Options: eval.Options{Home: aHome, Sandbox: sandboxKind(),
		NewModel: func(eval.Config, *world.World) (llm.Model, record.ModelSettings, error) {
			return block, record.ModelSettings{Provider: "scripted", Name: "blocker"}, nil
		}}}
	stopA := run(a)
	select {
	case <-block.started:
	case <-ctx.Done():
		t.Fatal("a never started the rollout")
	}
	stopA() // graceful: hand back

	b := &Worker{Conn: connect(t, s.URL(), ttl), Name: "b", Version: "v1", Options: eval.Options{Home: t.TempDir(), Sandbox: sandboxKind(), NewModel: oracle}}
	stopB := run(b)
	defer stopB()
	for {
		if ok, _ := c.Scored(ctx, j); ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the handed-back rollout was not scored before the deadline (well under its lease TTL)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	runs, _ := os.ReadDir(filepath.Join(aHome, "runs"))
	if len(runs) != 1 {
		t.Fatalf("a has %d runs, want 1", len(runs))
	}
	if _, err := os.Stat(filepath.Join(aHome, "runs", runs[0].Name(), "ABANDONED")); err != nil {
		t.Fatalf("a's handed-back run is not marked abandoned: %v", err)
	}
}
