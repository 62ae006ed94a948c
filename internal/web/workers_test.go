package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apodex/apodex/internal/web"
)

// fakeQueue answers /api/workers from a status the test changes.
type fakeQueue struct {
	mu  sync.Mutex
	st  web.QueueStatus
	err error
}

func (q *fakeQueue) Workers(context.Context) (web.QueueStatus, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st, q.err
}

func (q *fakeQueue) set(st web.QueueStatus, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.st, q.err = st, err
}

// TestWorkersAPI: without a queue /api/workers is a 404 saying how to get
// one; with one, its workers and rollouts in flight (empty lists, not
// null); a queue that fails is a 502 naming the error.
func TestWorkersAPI(t *testing.T) {
	srv := serve(t, web.Config{Home: t.TempDir()})
	if code, e := getErr(t, srv.URL+"/api/workers"); code != 404 || !strings.Contains(e, "--nats") {
		t.Fatalf("no queue: %d %v", code, e)
	}
	q := &fakeQueue{st: web.QueueStatus{URL: "nats://q:4222"}}
	srv = serve(t, web.Config{Home: t.TempDir(), Queue: q})
	var raw map[string]any
	if code := get(t, srv, "/api/workers", &raw); code != 200 || raw["workers"] == nil || raw["in_flight"] == nil {
		t.Fatalf("empty queue: %d %v", code, raw)
	}
	q.set(web.QueueStatus{}, errors.New("nats: no servers available for connection"))
	if code, e := getErr(t, srv.URL+"/api/workers"); code != 502 || !strings.Contains(e, "no servers available") {
		t.Fatalf("failing queue: %d %v", code, e)
	}
}

// getErr fetches url and returns the status and the answer's error text.
func getErr(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

// TestPageListsWorkers: the run list shows the queue's workers and the
// rollouts in flight, and follows the queue (a worker that appears later
// is listed without a reload).
func TestPageListsWorkers(t *testing.T) {
	ctx := browser(t)
	now := time.Now()
	q := &fakeQueue{st: web.QueueStatus{URL: "nats://q:4222",
		Workers:  []web.QueueWorker{{Name: "gpu-1", Host: "box-a", Running: 2, Done: 7, Heartbeat: now}},
		InFlight: []web.QueueRollout{{Eval: "e-1", Rollout: "w-abc/react/3", Worker: "gpu-1", RunID: "r-9", Renewed: now}}}}
	srv := serve(t, web.Config{Home: t.TempDir(), Queue: q})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(css(`#workers tbody td`))); err != nil {
		t.Fatal(err)
	}
	workers, flight := text(t, ctx, `#workers`), text(t, ctx, `#in-flight`)
	for _, want := range []string{"gpu-1", "box-a", "7"} {
		if !strings.Contains(workers, want) {
			t.Errorf("workers table %q lacks %q", workers, want)
		}
	}
	for _, want := range []string{"e-1", "w-abc/react/3", "r-9"} {
		if !strings.Contains(flight, want) {
			t.Errorf("in-flight table %q lacks %q", flight, want)
		}
	}
	q.set(web.QueueStatus{URL: "nats://q:4222", Workers: []web.QueueWorker{{Name: "gpu-1", Host: "box-a", Heartbeat: now}, {Name: "late-2", Host: "box-b", Heartbeat: now}}}, nil)
	if err := chromedp.Do(ctx, poll(`document.getElementById("workers").textContent.includes("late-2") && document.getElementById("in-flight").textContent.includes("None")`)); err != nil {
		t.Fatalf("the page did not follow the queue: %v", err)
	}
	screenshotOf(t, ctx, "page-workers.png", `#workers-section`)
}

// TestPageWithoutQueueShowsNoWorkers: with no queue the section stays
// hidden.
func TestPageWithoutQueueShowsNoWorkers(t *testing.T) {
	ctx := browser(t)
	srv := serve(t, web.Config{Home: t.TempDir()})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), poll(`document.getElementById("workers-section") !== null`)); err != nil {
		t.Fatal(err)
	}
	if hidden := eval[bool](t, ctx, `document.getElementById("workers-section").hidden`); !hidden {
		t.Fatal("the workers section shows without a queue")
	}
}
