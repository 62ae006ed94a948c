package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/world"
)

// TestStaleWorkerCannotPublishASecondResult is the revived worker of the
// issue (SIGSTOP past its lease, then SIGCONT), in-process: worker a takes
// a rollout and stalls past its lease and ack wait; worker b gets the
// rollout redelivered and scores it; a then finishes its run and tries to
// publish: refused, and the rollout keeps its one result. A stale holder
// whose lease merely expired (nobody took over) is refused too.
func TestStaleWorkerCannotPublishASecondResult(t *testing.T) {
	s := embedded(t)
	ttl := 3 * time.Second
	c := connect(t, s.URL(), ttl)
	home, plan := prepared(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.PublishWorlds(ctx, home, plan); err != nil {
		t.Fatal(err)
	}
	jobs := eval.Pending(plan, nil, "v")[:1]
	if _, err := c.Publish(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	oracle := func(_ eval.Config, w *world.World) (llm.Model, record.ModelSettings, error) { return eval.Oracle(w) }

	// a: takes the message and the lease, then stalls.
	a := &Worker{Conn: connect(t, s.URL(), ttl), Name: "a", Version: "v", Options: eval.Options{Home: home, Sandbox: sandboxKind(), NewModel: oracle}}
	cons, err := a.Conn.js.Consumer(ctx, RolloutStream, WorkConsumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgA jetstream.Msg
	for m := range batch.Messages() {
		msgA = m
	}
	if msgA == nil {
		t.Fatal("no rollout delivered to a")
	}
	leaseA, err := a.Conn.Acquire(ctx, jobs[0], "a")
	if err != nil {
		t.Fatal(err)
	}
	resA := eval.RunOne(ctx, jobs[0], a.Options, nil)

	// b: gets the redelivery once a's lease and ack wait ran out.
	b := &Worker{Conn: connect(t, s.URL(), ttl), Name: "b", Version: "v", Options: eval.Options{Home: t.TempDir(), Sandbox: sandboxKind(), NewModel: oracle}}
	bctx, stopB := context.WithCancel(ctx)
	bDone := make(chan error, 1)
	go func() { bDone <- b.Run(bctx) }()
	for {
		if ok, _ := c.Scored(ctx, jobs[0]); ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("b never scored the redelivered rollout")
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopB()
	<-bDone

	// a wakes up and finishes.
	a.finish(ctx, msgA, jobs[0], leaseA, resA)
	if n := resultCount(t, c); n != 1 {
		t.Fatalf("%d result messages after the stale worker finished; want 1", n)
	}
	raw, err := c.results.GetLastMsgForSubject(ctx, resultSubjectOf(jobs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !contains(string(raw.Data), `"worker":"b"`) {
		t.Fatalf("the result is not b's: %s", raw.Data)
	}

	// A lease that merely expired fences its holder as well.
	j := eval.Pending(plan, nil, "v")[1]
	l, err := c.Acquire(ctx, j, "a")
	if err != nil {
		t.Fatal(err)
	}
	waitExpired(t, c, j)
	if _, err := c.Publish(ctx, []eval.Job{j}); err != nil {
		t.Fatal(err)
	}
	batch, err = cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		a.finish(ctx, m, j, l, eval.RunOne(ctx, j, a.Options, nil))
	}
	if ok, _ := c.Scored(ctx, j); ok {
		t.Fatal("a holder whose lease expired published a result")
	}
}

// resultCount is the number of result messages (abandoned-run reports
// left out).
func resultCount(t *testing.T, c *Conn) uint64 {
	t.Helper()
	info, err := c.results.Info(context.Background(), jetstream.WithSubjectFilter(resultSubject+">"))
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	for _, k := range info.State.Subjects {
		n += k
	}
	return n
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
