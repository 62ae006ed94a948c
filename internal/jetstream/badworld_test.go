package jetstream

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// TestTamperedWorldBundleFailsAndIsNotCached: a world bundle whose content
// does not hash to its id fails the rollout with that reason (after its
// attempts), and the worker does not keep it.
func TestTamperedWorldBundleFailsAndIsNotCached(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), 3*time.Second)
	home, plan := prepared(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := world.NewStore(home).Get(plan.Worlds[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the world with one input changed, stored under its id.
	bad := filepath.Join(t.TempDir(), "bad")
	var buf bytes.Buffer
	if err := packDir(&buf, w.Dir); err != nil {
		t.Fatal(err)
	}
	if err := unpackDir(&buf, bad, nil); err != nil {
		t.Fatal(err)
	}
	files, _ := world.Files(bad)
	p := filepath.Join(bad, filepath.FromSlash(files[0].Path))
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("tampered\n"), 0o644)
	buf.Reset()
	if err := packDir(&buf, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := c.worlds.Put(ctx, jetstream.ObjectMeta{Name: w.ID}, &buf); err != nil {
		t.Fatal(err)
	}
	j := eval.Pending(plan, nil, "v")[0]
	j.MaxAttempts = 1
	if _, err := c.Publish(ctx, []eval.Job{j}); err != nil {
		t.Fatal(err)
	}
	wh := t.TempDir()
	wk := &Worker{Conn: connect(t, s.URL(), 3*time.Second), Name: "a", Version: "v", Options: eval.Options{Home: wh, Sandbox: sandboxKind(),
		NewModel: func(_ eval.Config, w *world.World) (llm.Model, record.ModelSettings, error) { return eval.Oracle(w) }}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wk.Run(wctx) }()
	defer func() { stop(); <-done }()

	msgCtx, mcancel := context.WithTimeout(ctx, 20*time.Second)
	defer mcancel()
	for {
		raw, err := c.results.GetLastMsgForSubject(msgCtx, resultSubjectOf(j))
		if err == nil {
			if !strings.Contains(string(raw.Data), "hashes to") {
				t.Fatalf("result does not give the reason: %s", raw.Data)
			}
			break
		}
		if msgCtx.Err() != nil {
			t.Fatal("no result for the rollout of a tampered world")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(wh, "worlds", w.ID)); !os.IsNotExist(err) {
		t.Fatalf("the tampered world was cached: %v", err)
	}
}

// TestHandBacksSpendNoAttempt: a rollout delivered and handed back three
// times (stopped workers, another version) still gets its max_attempts
// (2) real tries when its model cannot be built, and then one failed
// result naming the error.
func TestHandBacksSpendNoAttempt(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), 3*time.Second)
	home, plan := prepared(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := c.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	j := eval.Pending(plan, nil, "v")[0]
	j.MaxAttempts = 2
	if _, err := c.Publish(ctx, []eval.Job{j}); err != nil {
		t.Fatal(err)
	}
	cons, err := c.js.Consumer(ctx, RolloutStream, WorkConsumer)
	if err != nil {
		t.Fatal(err)
	}
	for handBacks := 0; handBacks < 3; {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			m.Nak()
			handBacks++
		}
	}
	var tries atomic.Int32
	wk := &Worker{Conn: connect(t, s.URL(), 3*time.Second), Name: "a", Version: "v", Options: eval.Options{Home: t.TempDir(), Sandbox: sandboxKind(),
		NewModel: func(eval.Config, *world.World) (llm.Model, record.ModelSettings, error) {
			tries.Add(1)
			return nil, record.ModelSettings{}, errors.New("no such model endpoint")
		}}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wk.Run(wctx) }()
	defer func() { stop(); <-done }()
	for {
		raw, err := c.results.GetLastMsgForSubject(ctx, resultSubjectOf(j))
		if err == nil {
			if !strings.Contains(string(raw.Data), "no such model endpoint") {
				t.Fatalf("result does not give the reason: %s", raw.Data)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no result for a rollout whose model cannot be built")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := tries.Load(); n != 2 {
		t.Fatalf("%d attempts after 3 hand-backs, want max_attempts = 2", n)
	}
}
