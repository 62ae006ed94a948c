package jetstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
)

// TestCollectSurvivesAConsumerNameNobodyAnswers is the stall of issue 30's
// cluster check, on one server: results are being collected when the
// collector's connection drops; nats.go's ordered consumer then creates
// its next consumer (a new name) and, in the cluster, that R1 consumer
// can be placed on the node just killed, which the others still count
// online: the creation goes unanswered, and so does every later request
// for that name. Here a proxy between the collector and the server plays
// that node: it withholds every creation request for the first consumer
// named after the cut. The collector must read on (on a consumer of
// another name) and end with every result once each; nats.go alone
// retried the dead name forever.
func TestCollectSurvivesAConsumerNameNobodyAnswers(t *testing.T) {
	s := embedded(t)
	p := newNATSProxy(t, s.URL())
	var mu sync.Mutex
	armed, dead, withheld := false, "", 0
	p.drop = func(subject string) bool { // $JS.API.CONSUMER.CREATE.<stream>.<name>[.<filter>]
		tok := strings.Split(subject, ".")
		if len(tok) < 6 || !strings.HasPrefix(subject, "$JS.API.CONSUMER.CREATE."+ResultStream+".") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if !armed {
			return false
		}
		if dead == "" {
			dead = tok[5]
		}
		if tok[5] == dead {
			withheld++
			return true
		}
		return false
	}
	home, plan := prepared(t, 2)
	pub := connect(t, s.URL(), 0)
	jobs := eval.Pending(plan, nil, "v")
	publish := func(js []eval.Job) {
		for _, j := range js {
			raw, _ := json.Marshal(Outcome{Result: eval.Result{World: j.World.ID, Config: j.Config.Name, Rollout: j.Rollout, Status: "completed"}, Worker: "w"})
			if _, err := pub.js.Publish(context.Background(), resultSubjectOf(j), raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	half := len(jobs) / 2
	publish(jobs[:half])

	c := connect(t, p.url(), 0)
	c.Log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	col, err := eval.OpenCollector(eval.Options{Home: home}, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Collect(ctx, home, plan, col) }()
	lines := func() int { rs, _ := eval.ReadResults(home, plan.ID); return len(rs) }
	for lines() < half {
		select {
		case err := <-done:
			t.Fatalf("Collect ended early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}

	mu.Lock()
	armed = true // the next consumer named is on the dead node
	mu.Unlock()
	p.cut()
	publish(jobs[half:])
	err = <-done
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("Collect: %v (%d of %d results; %d creation requests withheld for %q)", err, lines(), len(jobs), withheld, dead)
	}
	if withheld == 0 {
		t.Fatal("no consumer creation was withheld: the test did not reproduce the dead node")
	}
	rs, err := eval.ReadResults(home, plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Key()] {
			t.Errorf("%s collected twice", r.Key())
		}
		seen[r.Key()] = true
	}
	if len(seen) != len(jobs) || len(rs) != len(jobs) {
		t.Fatalf("%d lines, %d rollouts, want %d", len(rs), len(seen), len(jobs))
	}
}

// TestCollectNowTakesLinesOnly: eval show from another host (CollectNow)
// writes the result lines and fetches no record and no abandoned run; a
// later collect of the same home (eval resume --wait, export --follow)
// fetches the records of the lines it finds and keeps the abandoned runs.
func TestCollectNowTakesLinesOnly(t *testing.T) {
	s := embedded(t)
	c := connect(t, s.URL(), 0)
	home, plan := prepared(t, 1)
	jobs := eval.Pending(plan, nil, "v")
	ctx := context.Background()
	ship := func(id string) {
		dir := filepath.Join(t.TempDir(), id)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte("{}\n"), 0o644)
		if err := putDir(ctx, c.records, id, dir); err != nil {
			t.Fatal(err)
		}
	}
	const scored, dropped = "20261202-000000-aaaaaa", "20261202-000000-bbbbbb"
	ship(scored)
	ship(dropped)
	for i, j := range jobs {
		o := Outcome{Result: eval.Result{World: j.World.ID, Config: j.Config.Name, Rollout: j.Rollout, Status: "completed"}, Worker: "w"}
		if i == 0 {
			o.Result.RunID, o.Record = scored, scored
		}
		raw, _ := json.Marshal(o)
		if _, err := c.js.Publish(ctx, resultSubjectOf(j), raw); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(Abandoned{World: jobs[1].World.ID, Config: jobs[1].Config.Name, RunID: dropped, Worker: "w", Reason: "test", Shipped: true})
	if _, err := c.js.Publish(ctx, abandonedSubject+leaseKey(jobs[1]), raw); err != nil {
		t.Fatal(err)
	}

	n, err := c.CollectNow(ctx, eval.Options{Home: home}, plan)
	if err != nil || n != len(jobs) {
		t.Fatalf("CollectNow: %d lines, %v; want %d", n, err, len(jobs))
	}
	for _, id := range []string{scored, dropped} {
		if _, err := os.Stat(filepath.Join(home, "runs", id)); err == nil {
			t.Errorf("CollectNow fetched record %s", id)
		}
	}
	if ab := ReadAbandoned(home, plan.ID); len(ab) != 0 {
		t.Errorf("CollectNow kept abandoned runs %+v", ab)
	}

	if n, err := c.CollectEval(ctx, eval.Options{Home: home}, plan); err != nil || n != len(jobs) {
		t.Fatalf("CollectEval: %d lines, %v; want %d", n, err, len(jobs))
	}
	for _, id := range []string{scored, dropped} {
		if _, err := os.Stat(filepath.Join(home, "runs", id, "events.jsonl")); err != nil {
			t.Errorf("record %s not fetched by the collect after CollectNow: %v", id, err)
		}
	}
	if ab := ReadAbandoned(home, plan.ID); len(ab) != 1 || ab[0].RunID != dropped || !ab[0].Shipped {
		t.Errorf("abandoned runs after the collect: %+v, want %s, shipped", ab, dropped)
	}
	if rs, _ := eval.ReadResults(home, plan.ID); len(rs) != len(jobs) {
		t.Errorf("%d result lines, want %d (each once)", len(rs), len(jobs))
	}
}
