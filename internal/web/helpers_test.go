package web_test

import (
	"context"
	"encoding/json"
	"github.com/apodex/apodex/internal/runtest"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/web"
)

// slow delays every model call, so a scripted run stays live long enough
// to be watched.
type slow struct {
	llm.Model
	delay time.Duration
}

func (s slow) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Model.Generate(ctx, req)
}

// needBwrap skips a test that runs the team demo, whose script expects
// what the sandbox shows (without it the demo's gate fails).
func needBwrap(t *testing.T) {
	t.Helper()
	runtest.NeedSandbox(t)
}

const teamDemo = "../../examples/team-csv"

// teamConfig is the team-csv demo under home as run id, each model call
// delayed by delay.
func teamConfig(t *testing.T, home, id string, delay time.Duration) run.Config {
	t.Helper()
	needBwrap(t)
	m, err := scripted.Load(filepath.Join(teamDemo, "script.json"))
	if err != nil {
		t.Fatal(err)
	}
	return run.Config{
		Home:      home,
		Objective: "Sum north and south and report",
		Model:     slow{m, delay},
		ModelInfo: record.ModelSettings{Provider: "scripted"},
		NewID:     func() string { return id },
		InputsDir: filepath.Join(teamDemo, "inputs"),
		Settings:  run.Settings{MaxAttempts: 1, Mode: run.ModeTeam, Sandbox: runtest.SandboxKind()},
	}
}

// finishedTeamRun runs the demo to its end and returns its directory.
func finishedTeamRun(t *testing.T, home, id string) string {
	t.Helper()
	s, err := run.Execute(context.Background(), teamConfig(t, home, id, 0))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusCompleted {
		t.Fatalf("the team demo ended %s (%s): %s", s.Status, s.Termination, s.Error)
	}
	return s.RunDir
}

// liveTeamRun starts the demo slowed down; it returns when the run's
// record exists, and the test waits for the run's end in cleanup.
func liveTeamRun(t *testing.T, home, id string, delay time.Duration) (done <-chan struct{}) {
	t.Helper()
	needBwrap(t) // before the goroutine: a skip must come from the test's own
	ch := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(ch)
		if _, err := run.Execute(ctx, teamConfig(t, home, id, delay)); err != nil {
			t.Errorf("live run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-ch })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := record.First(filepath.Join(home, "runs", id)); err == nil {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatal("the live run wrote no record in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serve is a server over home on a loopback test listener.
func serve(t testing.TB, cfg web.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(web.New(cfg))
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path and decodes a JSON answer into v (when v is not nil).
func get(t *testing.T, srv *httptest.Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return resp.StatusCode
}

// post sends body as JSON and returns the status and the decoded answer.
func post(t *testing.T, srv *httptest.Server, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// failedRun runs the csv-sum task with a script that guesses the sum and
// never writes the report: the delivery and both verifier clauses fail.
func failedRun(t *testing.T, home, id string) string {
	t.Helper()
	needBwrap(t)
	m, err := scripted.Load("testdata/failing-script.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Load("../../examples/csv-sum/task.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := run.Execute(context.Background(), run.Config{
		Home: home, Contract: c, Model: m, ModelInfo: record.ModelSettings{Provider: "scripted"},
		NewID: func() string { return id }, Settings: run.Settings{MaxAttempts: 1, Sandbox: runtest.SandboxKind()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusFailed {
		t.Fatalf("the failing script ended %s (%s)", s.Status, s.Termination)
	}
	return s.RunDir
}
