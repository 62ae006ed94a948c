package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/jetstream"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
)

// TestWorkerChildProcess is the worker a test kills; it only runs as a
// child.
func TestWorkerChildProcess(t *testing.T) {
	runAsChild(t, "APODEX_WORKER_CHILD_ARGS", "TestWorkerKilledMidRollout")
}

// TestWorkerKilledMidRollout: an `apodex worker` process takes every
// rollout of a queued eval; one world's model calls hang; the worker is
// killed with SIGKILL while they do. Another worker then finishes the
// hung rollouts after their lease runs out, and `eval resume --wait`
// collects exactly one passing result per rollout, each with its record.
// The second worker shares the killed one's home and first cleans up the
// overlays it left mounted (else the temporary home cannot be removed).
func TestWorkerKilledMidRollout(t *testing.T) {
	srv, err := jetstream.Embedded(jetstream.ServerConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	sbx := sandbox.KindAuto
	if _, err := sandbox.New(sbx); err != nil {
		sbx = "none"
	}
	home := t.TempDir()
	var ids []string
	for _, fam := range []string{"code", "file", "search"} {
		ids = append(ids, genIDs(t, home, fam, "--seed", "3", "--level", "1")[0])
	}
	slow := ids[0]
	st := world.NewStore(home)
	solutions := map[string][]llm.ToolCall{}
	objectives := map[string]string{}
	for _, id := range ids {
		w, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		solutions[id], _ = eval.SolutionCalls(w)
		objectives[id] = w.Manifest.Contract.Objective
	}
	var hang atomic.Bool
	hang.Store(true)
	model := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		first, turn := "", 0
		for _, m := range req.Messages {
			if m.Role == "user" && first == "" {
				first = m.Content
			}
			if m.Role == "assistant" {
				turn++
			}
		}
		usage := &llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, Reported: true}
		for id, obj := range objectives {
			if !strings.HasPrefix(first, obj) {
				continue
			}
			switch {
			case id == slow && hang.Load():
				return llmtest.Turn{Hang: true}
			case turn == 0:
				return llmtest.Turn{Calls: solutions[id], Usage: usage}
			}
			return llmtest.Turn{Calls: []llm.ToolCall{finish("done")}, Usage: usage}
		}
		return llmtest.Turn{Status: 400}
	})
	suite := filepath.Join(t.TempDir(), "suite.yaml")
	os.WriteFile(suite, []byte(fmt.Sprintf("name: kill\nrollouts: 2\nworlds: [{id: %s}, {id: %s}, {id: %s}]\nconfigs:\n  - {name: react, provider: openai, base_url: %q, model: m}\n",
		ids[0], ids[1], ids[2], model.URL)), 0o644)

	code, stdout, stderr := cli(t, "eval", suite, "--home", home, "--nats", srv.URL(), "--quiet")
	if code != 0 || !strings.Contains(stdout, "queued") {
		t.Fatalf("eval --nats (no wait): exit %d\n%s%s", code, stdout, stderr)
	}
	evalID := strings.TrimSuffix(strings.Fields(stdout)[1], ":")

	// Another host follows the eval from the queue alone: a home with
	// neither the plan nor the runs.
	follower, chatOut, meta := t.TempDir(), filepath.Join(t.TempDir(), "chat.jsonl"), filepath.Join(t.TempDir(), "meta.jsonl")
	type exit struct {
		code   int
		stderr string
	}
	followed := make(chan exit, 1)
	go func() {
		code, _, stderr := cli(t, "export", "--follow", evalID, "--nats", srv.URL(), "--home", follower, "--format", "chat", "--out", chatOut, "--metadata", meta)
		followed <- exit{code, stderr}
	}()

	childHome := t.TempDir()
	args, _ := json.Marshal([]string{"worker", "--nats", srv.URL(), "--home", childHome, "--name", "doomed", "--parallel", "6", "--sandbox", sbx, "--lease-ttl", "3s"})
	child := exec.Command(os.Args[0], "-test.run=^TestWorkerChildProcess$")
	child.Env = append(os.Environ(), "APODEX_WORKER_CHILD_ARGS="+string(args))
	var childErr strings.Builder
	child.Stderr = &childErr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	// The child has started all six rollouts; the slow world's two hang.
	for deadline := time.Now().Add(time.Minute); ; {
		if runs, _ := os.ReadDir(filepath.Join(childHome, "runs")); len(runs) == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start the six rollouts\n%s", childErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The other worlds' four rollouts end (their results published: the
	// worker's started file notes each) before the kill, however loaded
	// the machine; the slow world's two hang.
	for deadline := time.Now().Add(time.Minute); ; {
		b, _ := os.ReadFile(filepath.Join(childHome, "workers", "doomed.started"))
		if strings.Count("\n"+string(b), "\n-") >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not end the four fast rollouts\n%s", childErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	child.Process.Kill() // SIGKILL
	child.Wait()
	hang.Store(false)
	killedRuns := map[string]bool{}
	runs, _ := os.ReadDir(filepath.Join(childHome, "runs"))
	for _, r := range runs {
		killedRuns[r.Name()] = true
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cli := func(args ...string) (int, string) {
			var out, errb strings.Builder
			return Run(ctx, args, &out, &errb), errb.String()
		}
		// On the dead worker's home: it first cleans up the overlays the
		// killed worker left mounted.
		if code, e := cli("worker", "--nats", srv.URL(), "--home", childHome, "--name", "rescuer", "--parallel", "2", "--sandbox", sbx, "--lease-ttl", "3s"); code != 0 {
			t.Errorf("rescuer: exit %d\n%s", code, e)
		}
	}()
	defer func() { stop(); wg.Wait() }()
	code, stdout, stderr = cli(t, "eval", "resume", evalID, "--home", home, "--nats", srv.URL(), "--wait", "--quiet")
	if code != 0 || !strings.Contains(stdout, "6 of 6") {
		t.Fatalf("eval resume --wait: exit %d\n%s%s", code, stdout, stderr)
	}
	rs, _ := eval.ReadResults(home, evalID)
	seen := map[string]bool{}
	slowDone := 0
	for _, r := range rs {
		if seen[r.Key()] {
			t.Errorf("%s scored twice", r.Key())
		}
		seen[r.Key()] = true
		if r.Correct != 1 {
			t.Errorf("%s: %s %s", r.Key(), r.Status, r.Error)
		}
		if _, err := os.Stat(filepath.Join(home, "runs", r.RunID, "events.jsonl")); err != nil {
			t.Errorf("%s: no record on the eval's home: %v", r.Key(), err)
		}
		if r.World == slow {
			slowDone++
			if killedRuns[r.RunID] {
				t.Errorf("%s was scored from the killed worker's run", r.Key())
			}
		}
	}
	if len(rs) != 6 || slowDone != 2 {
		t.Fatalf("%d results (%d of the hung world), want 6 (2)", len(rs), slowDone)
	}

	// The killed worker's two unfinished runs are kept as abandoned: the
	// rescuer found them at its start, shipped them, and the eval's host
	// lists them with their records, never counted.
	ab := jetstream.ReadAbandoned(home, evalID)
	if len(ab) != 2 {
		t.Fatalf("%d abandoned runs on the eval's home, want the killed worker's 2: %+v", len(ab), ab)
	}
	for _, a := range ab {
		if !killedRuns[a.RunID] || a.World != slow || !a.Shipped || !strings.Contains(a.Reason, "died") {
			t.Errorf("abandoned %+v: want a shipped run of the hung world from the killed worker", a)
		}
		if _, err := os.Stat(filepath.Join(home, "runs", a.RunID, "events.jsonl")); err != nil {
			t.Errorf("abandoned run %s not readable on the eval's home: %v", a.RunID, err)
		}
		for _, r := range rs {
			if r.RunID == a.RunID {
				t.Errorf("abandoned run %s was counted", a.RunID)
			}
		}
	}

	// The follower exported every rollout, from records it fetched.
	var f exit
	select {
	case f = <-followed:
	case <-time.After(time.Minute):
		t.Fatal("export --follow --nats did not end after the eval did")
	}
	if f.code != 0 {
		t.Fatalf("export --follow --nats: exit %d\n%s", f.code, f.stderr)
	}
	raw, _ := os.ReadFile(meta)
	exported := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var m struct {
			Run string `json:"run"`
		}
		json.Unmarshal([]byte(line), &m)
		exported[m.Run] = true
	}
	if len(exported) != len(rs) {
		t.Errorf("the follower exported %d runs, want the %d counted", len(exported), len(rs))
	}
	for _, r := range rs {
		if !exported[r.RunID] {
			t.Errorf("the follower did not export run %s (exported %v)", r.RunID, exported)
		}
		if _, err := os.Stat(filepath.Join(follower, "runs", r.RunID, "events.jsonl")); err != nil {
			t.Errorf("run %s not fetched to the follower: %v", r.RunID, err)
		}
	}
	if fr, _ := eval.ReadResults(follower, evalID); len(fr) != 6 {
		t.Errorf("the follower's results.jsonl has %d lines, want 6", len(fr))
	}
}
