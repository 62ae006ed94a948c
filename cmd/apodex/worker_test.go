package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/apodex/apodex/internal/cmdline/evalcmd"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/jetstream"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/web"
)

// TestEvalOnNATSWithTwoWorkers: the bundled oracle suite queued on an
// in-process server (loopback, random port) and run by two `apodex
// worker`s on their own homes: every rollout has one result line on the
// eval's home, with its record; a resume queues nothing new; an
// unreachable URL is a usage error naming the URL, before any eval exists.
func TestEvalOnNATSWithTwoWorkers(t *testing.T) {
	srv, err := jetstream.Embedded(jetstream.ServerConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sbx := sandbox.KindAuto
	if _, err := sandbox.New(sbx); err != nil {
		sbx = "none"
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			if code := Run(ctx, []string{"worker", "--nats", srv.URL(), "--home", t.TempDir(), "--name", name, "--parallel", "2", "--sandbox", sbx, "--lease-ttl", "5s"}, &out, &errb); code != 0 {
				t.Errorf("worker %s: exit %d\n%s", name, code, errb.String())
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	home := t.TempDir()
	code, stdout, stderr := cli(t, "eval", "../../examples/suite/oracle.yaml", "--home", home, "--nats", srv.URL(), "--wait", "--quiet")
	if code != 0 {
		t.Fatalf("eval --nats: exit %d\n%s%s", code, stdout, stderr)
	}
	id := strings.TrimSuffix(strings.Fields(stdout)[1], ":")
	rs, err := eval.ReadResults(home, id)
	if err != nil || len(rs) != 24 {
		t.Fatalf("%d results (%v), want 24", len(rs), err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Key()] {
			t.Errorf("%s scored twice", r.Key())
		}
		seen[r.Key()] = true
		if r.Correct != 1 {
			t.Errorf("%s failed: %s %s", r.Key(), r.Status, r.Error)
		}
		if _, err := os.Stat(filepath.Join(home, "runs", r.RunID, "events.jsonl")); err != nil {
			t.Errorf("%s: record not shipped to the eval's home: %v", r.Key(), err)
		}
	}
	code, stdout, stderr = cli(t, "eval", "resume", id, "--home", home, "--nats", srv.URL(), "--wait")
	if code != 0 || !strings.Contains(stderr, "0 unscored, 0 newly queued") || !strings.Contains(stdout, "24 of 24") {
		t.Fatalf("resume of a finished eval: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = cli(t, "eval", "show", id, "--home", home, "--nats", srv.URL())
	if code != 0 || !strings.Contains(stdout, "workers on "+srv.URL()+": 2") || !strings.Contains(stdout, "  w1 on ") || !strings.Contains(stdout, "rollouts in flight: 0") {
		t.Fatalf("eval show --nats: exit %d\n%s%s", code, stdout, stderr)
	}

	// From another host: eval show and eval resume --wait need only the
	// URL (the plan, results and records come from the queue). Show
	// fetches what it shows, the result lines; resume --wait then fetches
	// their records.
	other := t.TempDir()
	code, stdout, stderr = cli(t, "eval", "show", id, "--home", other, "--nats", srv.URL())
	if code != 0 || !strings.Contains(stdout, "24/24 rollouts done") || !strings.Contains(stdout, "results on "+srv.URL()+": 24 ") {
		t.Fatalf("eval show --nats from another home: exit %d\n%s%s", code, stdout, stderr)
	}
	rs, _ = eval.ReadResults(other, id)
	if len(rs) != 24 {
		t.Fatalf("eval show from another home collected %d results, want 24", len(rs))
	}
	if ents, _ := os.ReadDir(filepath.Join(other, "runs")); len(ents) != 0 {
		t.Fatalf("eval show from another home fetched %d records; it shows none", len(ents))
	}
	code, stdout, stderr = cli(t, "eval", "resume", id, "--home", other, "--nats", srv.URL(), "--wait")
	if code != 0 || !strings.Contains(stdout, "24 of 24") || !strings.Contains(stderr, "0 newly queued") {
		t.Fatalf("eval resume --nats --wait from another home: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, r := range rs {
		if _, err := os.Stat(filepath.Join(other, "runs", r.RunID, "events.jsonl")); err != nil {
			t.Fatalf("after eval show, resume --wait did not fetch the record of %s: %v", r.Key(), err)
		}
	}

	// The page's list: apodex serve --nats URL answers /api/workers.
	q, err := evalcmd.ServeQueue(srv.URL(), home)
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(web.New(web.Config{Home: home, Queue: q}))
	defer page.Close()
	resp, err := http.Get(page.URL + "/api/workers")
	if err != nil {
		t.Fatal(err)
	}
	var qs web.QueueStatus
	json.NewDecoder(resp.Body).Decode(&qs)
	resp.Body.Close()
	names := map[string]int64{}
	for _, w := range qs.Workers {
		names[w.Name] = w.Done
	}
	if resp.StatusCode != 200 || len(names) != 2 || names["w1"]+names["w2"] > 24 || len(qs.InFlight) != 0 {
		t.Fatalf("/api/workers: %d %+v", resp.StatusCode, qs)
	}

	bad := t.TempDir()
	code, _, stderr = cli(t, "eval", "../../examples/suite/oracle.yaml", "--home", bad, "--nats", "nats://127.0.0.1:1")
	if code != cmdline.ExitUsage || !strings.Contains(stderr, "nats://127.0.0.1:1") {
		t.Fatalf("unreachable URL: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(bad, "evals")); err == nil {
		t.Fatal("an eval was created although the queue was unreachable")
	}
}
