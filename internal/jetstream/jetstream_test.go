package jetstream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// embedded starts a server on a random loopback port with its store in a
// temporary directory.
func embedded(t *testing.T) *Server {
	t.Helper()
	s, err := Embedded(ServerConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t *testing.T, url string, ttl time.Duration) *Conn {
	t.Helper()
	c, err := Connect(context.Background(), url, "test", ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// prepared is an eval home with one world per family and a written plan
// of rollouts rollouts each under one oracle configuration.
func prepared(t *testing.T, rollouts int) (string, *eval.Plan) {
	t.Helper()
	home := t.TempDir()
	st := world.NewStore(home)
	s := &eval.Suite{Name: "t", Rollouts: rollouts, Configs: []eval.Config{{Name: "oracle", Provider: "oracle"}}}
	for _, fam := range gen.Families {
		dir := filepath.Join(t.TempDir(), fam)
		if _, err := gen.Generate(gen.Spec{Family: fam, Seed: 5, Level: 1}, dir); err != nil {
			t.Fatal(err)
		}
		w, _, err := st.Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		s.Worlds = append(s.Worlds, eval.WorldRef{ID: w.ID})
	}
	plan, err := eval.Prepare(s, eval.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	return home, plan
}

func sandboxKind() string {
	if _, err := sandbox.New(sandbox.KindAuto); err != nil {
		return "none"
	}
	return sandbox.KindAuto
}

func TestSetupIsIdempotentAndUnreachableURLFails(t *testing.T) {
	s := embedded(t)
	a := connect(t, s.URL(), time.Second)
	b := connect(t, s.URL(), 2*time.Second) // again, with another TTL: updated, not refused
	if a.Replicas != 1 || b.Replicas != 1 {
		t.Fatalf("replicas %d, %d on one server; want 1", a.Replicas, b.Replicas)
	}
	_, err := Connect(context.Background(), "nats://127.0.0.1:1", "test", 0)
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("unreachable URL: %v; want an error naming it", err)
	}
}

// TestRepublishedRolloutIsQueuedOnce: publishing an eval's rollouts twice
// (a retried `eval`, a resume) queues each once.
func TestRepublishedRolloutIsQueuedOnce(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), time.Second)
	_, plan := prepared(t, 2)
	jobs := eval.Pending(plan, nil, "v")
	ctx := context.Background()
	for i, want := range []int{len(jobs), 0} {
		n, err := c.Publish(ctx, jobs)
		if err != nil || n != want {
			t.Fatalf("publish #%d: %d new, %v; want %d", i, n, err, want)
		}
	}
	info, err := c.rollouts.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(jobs)) {
		t.Fatalf("%d messages queued, want %d", info.State.Msgs, len(jobs))
	}
}

// TestExpiredLeaseCannotCommit: a holder whose lease expired can neither
// renew nor commit, whether or not another worker took the rollout, and
// the taker's token differs.
func TestExpiredLeaseCannotCommit(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), time.Second)
	_, plan := prepared(t, 1)
	jobs := eval.Pending(plan, nil, "v")
	ctx := context.Background()
	for _, takeOver := range []bool{false, true} {
		j := jobs[0]
		if takeOver {
			j = jobs[1]
		}
		old, err := c.Acquire(ctx, j, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, j, "b"); !errors.Is(err, ErrHeld) {
			t.Fatalf("second acquire of a live lease: %v, want ErrHeld", err)
		}
		if err := old.Renew(ctx, "r-1"); err != nil {
			t.Fatalf("renew a live lease: %v", err)
		}
		waitExpired(t, c, j)
		if takeOver {
			nu, err := c.Acquire(ctx, j, "b")
			if err != nil {
				t.Fatalf("acquire after expiry: %v", err)
			}
			if nu.Token == old.Token {
				t.Fatalf("taker has the old token %d", nu.Token)
			}
			defer func() {
				if err := nu.Commit(ctx); err != nil {
					t.Errorf("the taker cannot commit: %v", err)
				}
			}()
		}
		if err := old.Renew(ctx, "r-1"); !errors.Is(err, ErrFenced) {
			t.Fatalf("takeover=%v: renew after expiry: %v, want ErrFenced", takeOver, err)
		}
		if err := old.Commit(ctx); !errors.Is(err, ErrFenced) {
			t.Fatalf("takeover=%v: commit after expiry: %v, want ErrFenced", takeOver, err)
		}
	}
}

func waitExpired(t *testing.T, c *Conn, j eval.Job) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.leases.Get(context.Background(), leaseKey(j)); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("lease never expired")
}

// blocker holds every model call of a worker until its context ends, and
// says when the first call arrived: the worker is then mid-rollout.
type blocker struct {
	once    sync.Once
	started chan struct{}
}

func (b *blocker) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	b.once.Do(func() { close(b.started) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestKilledWorkersRolloutIsFinishedByAnother: worker A takes a rollout
// and dies mid-rollout (its connection drops, its process stops); worker
// B, on another home, finishes every rollout, the killed one after its
// lease and ack wait run out. Every rollout has exactly one result line
// and one result message, and each result's record is readable on the
// eval's home.
func TestKilledWorkersRolloutIsFinishedByAnother(t *testing.T) {
	s := embedded(t)
	ttl := 2 * time.Second
	evalConn := connect(t, s.URL(), ttl)
	home, plan := prepared(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := evalConn.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	if _, err := evalConn.Publish(ctx, eval.Pending(plan, nil, "v")); err != nil {
		t.Fatal(err)
	}

	sbx := sandboxKind()
	block := &blocker{started: make(chan struct{})}
	aHome := t.TempDir()
	a := &Worker{Conn: connect(t, s.URL(), ttl), Name: "a", Version: "v", Options: eval.Options{Home: aHome, Sandbox: sbx,
		NewModel: func(eval.Config, *world.World) (llm.Model, record.ModelSettings, error) {
			return block, record.ModelSettings{Provider: "scripted", Name: "blocker"}, nil
		}}}
	actx, kill := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	select {
	case <-block.started:
	case <-ctx.Done():
		t.Fatal("worker a never started a rollout")
	}
	// Kill a: the connection drops first, so nothing it does after
	// reaches the server (no nak, no lease release, no result).
	a.Conn.Close()
	kill()
	<-aDone

	b := &Worker{Conn: connect(t, s.URL(), ttl), Name: "b", Version: "v", Parallel: 2,
		Options: eval.Options{Home: t.TempDir(), Sandbox: sbx, NewModel: func(_ eval.Config, w *world.World) (llm.Model, record.ModelSettings, error) {
			return eval.Oracle(w)
		}}}
	bctx, stopB := context.WithCancel(ctx)
	bDone := make(chan error, 1)
	go func() { bDone <- b.Run(bctx) }()
	defer func() { stopB(); <-bDone }()

	col, err := eval.OpenCollector(eval.Options{Home: home}, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	if err := evalConn.Collect(ctx, home, plan, col); err != nil {
		t.Fatalf("collect: %v (%d of %d)", err, col.Done(), col.Total())
	}
	results, err := eval.ReadResults(home, plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range results {
		seen[r.Key()]++
		if r.Status != "completed" || r.Correct != 1 {
			t.Errorf("%s: status %s correct %v error %q", r.Key(), r.Status, r.Correct, r.Error)
		}
		if _, err := os.Stat(filepath.Join(home, "runs", r.RunID, "events.jsonl")); err != nil {
			t.Errorf("%s: record of run %s not on the eval's home: %v", r.Key(), r.RunID, err)
		}
	}
	if len(results) != plan.Total() || len(seen) != plan.Total() {
		t.Fatalf("%d result lines for %d rollouts (%d distinct); want one each", len(results), plan.Total(), len(seen))
	}
	// a's partial run stays on a's home, never counted.
	partial, _ := os.ReadDir(filepath.Join(aHome, "runs"))
	if len(partial) != 1 {
		t.Fatalf("worker a left %d runs, want its one partial run", len(partial))
	}
	for _, r := range results {
		if r.RunID == partial[0].Name() {
			t.Fatalf("the killed worker's run %s was counted", r.RunID)
		}
	}
	if n := resultCount(t, evalConn); n != uint64(plan.Total()) {
		t.Fatalf("%d result messages, want %d", n, plan.Total())
	}
}
