package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
)

// views is what `runs --json` and `show --json` say of the only run in
// home (show's elapsed-free fields: the whole object).
func views(t *testing.T, home, id string) (runs, show string) {
	t.Helper()
	code, runs, errOut := cli(t, "runs", "--home", home, "--json")
	if code != 0 {
		t.Fatalf("runs: exit %d %s", code, errOut)
	}
	code, show, errOut = cli(t, "show", "--home", home, "--json", id)
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errOut)
	}
	return runs, show
}

// withoutCaches removes the run's summary and checkpoint.
func withoutCaches(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{runview.SummaryFile, runstate.CheckpointFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// A finished run keeps its summary and checkpoint; runs and show say the
// same with them, after they are deleted (the record is read) and once
// they were rebuilt.
func TestRunsAndShowWithoutSummaryOrCheckpoint(t *testing.T) {
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		calls(call("write_file", map[string]any{"path": "/workspace/a.txt", "content": "a\n"}), call("bash", map[string]any{"command": "cat /workspace/a.txt"})),
		calls(finish("done"))))
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "write a")...)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	id := decodeSummary(t, out).RunID
	dir := onlyRun(t, home)
	for _, f := range []string{runview.SummaryFile, runstate.CheckpointFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the finished run has no %s: %v", f, err)
		}
	}
	runs, show := views(t, home, id)
	var rows []runview.Row
	var info runview.Info
	if json.Unmarshal([]byte(runs), &rows) != nil || len(rows) != 1 || rows[0].Status != "completed" || rows[0].ToolCalls != 3 ||
		json.Unmarshal([]byte(show), &info) != nil || info.ToolCalls != 3 || len(info.Steps) != 3 {
		t.Fatalf("runs %s\nshow %s", runs, show)
	}
	withoutCaches(t, dir)
	runs2, show2 := views(t, home, id)
	if runs2 != runs || show2 != show {
		t.Errorf("without summary and checkpoint:\nruns %s\nwas  %s\nshow %s\nwas  %s", runs2, runs, show2, show)
	}
	for _, f := range []string{runview.SummaryFile, runstate.CheckpointFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("reading the run did not rebuild %s: %v", f, err)
		}
	}
	if runs3, show3 := views(t, home, id); runs3 != runs || show3 != show {
		t.Errorf("from the rebuilt files:\nruns %s\nshow %s", runs3, show3)
	}
}

// A run killed (SIGKILL) after its checkpoint: runs and show read the
// checkpoint, then the events after it, and say what the record says, as
// they do with the summary and checkpoint deleted.
func TestRunsAndShowAfterKill9(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	const perTurn, turns = 25, 20 // 500 writes: over CheckpointEvery events
	inFlight, release := make(chan struct{}, 4), make(chan struct{})
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n < turns {
			var cs []llm.ToolCall
			for i := range perTurn {
				cs = append(cs, call("write_file", map[string]any{"path": fmt.Sprintf("/workspace/f%d-%d.txt", n, i), "content": "x\n"}))
			}
			return calls(cs...)
		}
		inFlight <- struct{}{}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return calls(finish("late"))
	})
	t.Cleanup(func() { close(release) })
	cmd, errb, done := cliProcess(t, append(openaiArgs(home, srv), "--quiet", "--max-tool-calls", "1000", "write many files")...)
	waitOrFail(t, inFlight, "the model call after the writes")
	dir := onlyRun(t, home)
	cp := filepath.Join(dir, runstate.CheckpointFile)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var head struct {
			Seq int64 `json:"seq"`
		}
		data, _ := os.ReadFile(cp)
		if line, _, _ := strings.Cut(string(data), "\n"); json.Unmarshal([]byte(line), &head) == nil && head.Seq >= runstate.CheckpointEvery {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live run wrote no checkpoint past seq %d; stderr:\n%s", runstate.CheckpointEvery, errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	waitOrFail(t, done, "the killed run to exit")
	id := filepath.Base(dir)

	want, err := runstate.Load(dir) // the record, folded from its first line
	if err != nil {
		t.Fatal(err)
	}
	runs, show := views(t, home, id)
	var rows []runview.Row
	if err := json.Unmarshal([]byte(runs), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("runs --json: %v\n%s", err, runs)
	}
	r := rows[0]
	if r.Status != runview.StatusStopped || r.Events != want.Events || r.ToolCalls != want.ToolCalls || r.Turns != want.Turns ||
		r.Usage != want.Usage || want.ToolCalls != perTurn*turns {
		t.Errorf("runs after kill -9: %+v\nthe record says %d events, %d tool calls, %d turns, usage %+v", r, want.Events, want.ToolCalls, want.Turns, want.Usage)
	}
	var info runview.Info
	if err := json.Unmarshal([]byte(show), &info); err != nil {
		t.Fatal(err)
	}
	if info.Events != want.Events || info.ToolCalls != want.ToolCalls || len(info.Steps) != len(want.Steps) || info.Status != runview.StatusStopped {
		t.Errorf("show after kill -9: %d events, %d tool calls, %d steps, status %s; the record says %d, %d, %d",
			info.Events, info.ToolCalls, len(info.Steps), info.Status, want.Events, want.ToolCalls, len(want.Steps))
	}
	withoutCaches(t, dir)
	if runs2, show2 := views(t, home, id); runs2 != runs || show2 != show {
		t.Errorf("after kill -9, without summary and checkpoint:\nruns %s\nwas  %s\nshow %s\nwas  %s", runs2, runs, show2, show)
	}
}
