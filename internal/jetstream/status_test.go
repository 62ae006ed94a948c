package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// TestStatusListsWorkersAndRolloutsInFlight: while a worker holds a
// rollout, Status lists the worker (running 1) and the rollout with it;
// once the worker stops, neither is listed.
func TestStatusListsWorkersAndRolloutsInFlight(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), 3*time.Second)
	home, plan := prepared(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	j := eval.Pending(plan, nil, "v")[0]
	if _, err := c.Publish(ctx, []eval.Job{j}); err != nil {
		t.Fatal(err)
	}
	block := &blocker{started: make(chan struct{})}
	w := &Worker{Conn: connect(t, s.URL(), 3*time.Second), Name: "busy", Version: "v", Options: eval.Options{Home: t.TempDir(), Sandbox: sandboxKind(),
		NewModel: func(eval.Config, *world.World) (llm.Model, record.ModelSettings, error) {
			return block, record.ModelSettings{Provider: "scripted", Name: "blocker"}, nil
		}}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	<-block.started
	st, err := c.Status(ctx, plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Workers) != 1 || st.Workers[0].Name != "busy" || st.Workers[0].Host == "" {
		t.Fatalf("workers %+v, want busy", st.Workers)
	}
	if len(st.InFlight) != 1 || st.InFlight[0].Rollout != j.Key() || st.InFlight[0].Worker != "busy" {
		t.Fatalf("in flight %+v, want %s on busy", st.InFlight, j.Key())
	}
	stop()
	<-done
	st, err = c.Status(ctx, plan.ID)
	if err != nil || len(st.Workers) != 0 || len(st.InFlight) != 0 {
		t.Fatalf("after the stop: %+v, %v; want nothing listed", st, err)
	}
}
