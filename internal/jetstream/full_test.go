package jetstream

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// TestFullRecordStoreIsReportedAsTheResult: with the record store limited
// below a run's size, a finished rollout's result says the store is full
// (failed, not counted as passed, no run id on the eval's host), the
// rollout is acked (no endless hand-back), the run stays on the worker's
// home, and a new connection keeps the operator's limit. A full world
// store fails the eval before anything is queued.
func TestFullRecordStoreIsReportedAsTheResult(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), 3*time.Second)
	home, plan := prepared(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	limit := func(bucket string) {
		if _, err := c.js.UpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Storage: jetstream.FileStorage, MaxBytes: 512}); err != nil {
			t.Fatal(err)
		}
	}
	limit(RecordStore)
	j := eval.Pending(plan, nil, "v")[0]
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

	col, err := eval.OpenCollector(eval.Options{Home: home}, &eval.Plan{ID: plan.ID, Worlds: plan.Worlds[:1], Configs: plan.Configs, Rollouts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	if err := c.Collect(ctx, home, &eval.Plan{ID: plan.ID, Worlds: plan.Worlds[:1], Configs: plan.Configs, Rollouts: 1}, col); err != nil {
		t.Fatalf("collect: %v", err)
	}
	rs, _ := eval.ReadResults(home, plan.ID)
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	r := rs[0]
	if r.Status != "failed" || r.Correct != 0 || r.RunID != "" || !strings.Contains(r.Error, "object store "+RecordStore+" is full") || !strings.Contains(r.Error, "worker a") {
		t.Fatalf("result of a rollout whose record did not fit: %+v", r)
	}
	for {
		info, err := c.rollouts.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the rollout was never acked")
		}
		time.Sleep(50 * time.Millisecond)
	}
	runs, _ := os.ReadDir(filepath.Join(wh, "runs"))
	if len(runs) != 1 {
		t.Fatalf("the worker kept %d runs, want its one", len(runs))
	}
	again := connect(t, s.URL(), 3*time.Second)
	if st, err := again.records.Status(ctx); err != nil || st.(*jetstream.ObjectBucketStatus).StreamInfo().Config.MaxBytes != 512 {
		t.Fatalf("a new connection reset the store's limit: %v", err)
	}

	for _, pw := range plan.Worlds {
		if err := c.worlds.Delete(ctx, pw.ID); err != nil {
			t.Fatal(err)
		}
	}
	limit(WorldStore)
	err = again.PublishWorlds(ctx, home, plan)
	if !IsFull(err) || !strings.Contains(err.Error(), "nothing was queued") {
		t.Fatalf("a full world store: %v", err)
	}
}
