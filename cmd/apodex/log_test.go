package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
)

// `apodex log` of the demo shows the assistant's words, the awk command
// and its output, and the delivery; --json gives the same entries.
func TestLogOfTheDemo(t *testing.T) {
	home, id := csvDemo(t)
	code, out, errOut := cli(t, "log", "--home", home, id)
	if code != 0 {
		t.Fatalf("log: exit %d %s", code, errOut)
	}
	for _, want := range []string{
		"── main", "assistant (turn 1): First, see what inputs I have.",
		"▸ bash $ awk -F, 'NR>1", "│ sum=6637.00 rows=6",
		"delivery delivered", "delivered /outputs/sum.txt 8 bytes by main",
		`verification passed verify[0] "sum matches an independent recomputation"`,
		"finished completed (completed)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape codes in output that is not a terminal")
	}
	code, js, _ := cli(t, "log", "--home", home, "--json", id)
	if code != 0 {
		t.Fatalf("log --json: exit %d", code)
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
		var x struct{ Kind, Tool, Args, Output, Agent string }
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("not a JSON line: %v\n%s", err, line)
		}
		kinds[x.Kind]++
	}
	if kinds["assistant"] != 7 || kinds["tool_call"] != 8 || kinds["tool_result"] != 8 || kinds["delivery"] != 1 || kinds["run_finished"] != 1 {
		t.Errorf("entry kinds %v", kinds)
	}
	code, out, _ = cli(t, "log", "--home", home, "--agent", "nobody", id)
	if code != 0 || strings.Contains(out, "assistant") {
		t.Errorf("--agent nobody: exit %d\n%s", code, out)
	}
}

// A result clipped for the model is printed whole from its blob with --full.
func TestLogFull(t *testing.T) {
	home := t.TempDir()
	long := strings.Repeat("0123456789\n", 3000)
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		calls(call("write_file", map[string]any{"path": "/workspace/big.txt", "content": long})),
		calls(call("read_file", map[string]any{"path": "/workspace/big.txt", "limit": 3000})),
		calls(finish("done"))))
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "--sandbox", "none", "read a big file")...)
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, errOut)
	}
	id := decodeSummary(t, out).RunID
	_, clipped, _ := cli(t, "log", "--home", home, id)
	_, full, _ := cli(t, "log", "--home", home, "--full", id)
	if !strings.Contains(clipped, "--full prints") || strings.Count(full, "0123456789") < 2900 || len(full) <= len(clipped) {
		t.Errorf("clipped %d bytes, full %d bytes (%d lines of the file)", len(clipped), len(full), strings.Count(full, "0123456789"))
	}
}

// `log --full` never reads a blob through a symbolic link (F14): a blob
// replaced by a link to a host file is refused, and the refusal says so.
func TestLogFullRefusesLinkedBlob(t *testing.T) {
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(bash("seq 1 40000")), calls(finish("done"))))
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "--sandbox", "none", "count")...)
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, errOut)
	}
	dir := decodeSummary(t, out).RunDir
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ref string
	for _, r := range decodeAll[record.ToolResult](t, c.Events, record.TypeToolResult) {
		if r.FullRef != "" {
			ref = r.FullRef
		}
	}
	blob, err := record.BlobPath(dir, ref)
	if err != nil {
		t.Fatalf("no clipped result with a blob: %v", err)
	}
	secret := filepath.Join(home, "host-secret")
	os.WriteFile(secret, []byte("HOST SECRET\n"), 0o644)
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, blob); err != nil {
		t.Fatal(err)
	}
	code, full, errOut := cli(t, "log", "--home", home, "--full", filepath.Base(dir))
	if code != 0 {
		t.Fatalf("log --full: exit %d %s", code, errOut)
	}
	if strings.Contains(full, "HOST SECRET") {
		t.Errorf("log --full printed a host file through a blob link:\n%s", full)
	}
	if !strings.Contains(full, "blobs/"+filepath.Base(blob)+" is a symbolic link; not followed") {
		t.Errorf("log --full does not say what it refused:\n%s", full)
	}
}

// `log --follow` of a live run prints steps as they happen and exits when
// the run ends.
func TestLogFollowLiveRun(t *testing.T) {
	home := t.TempDir()
	gate := make(chan struct{})
	srv := llmtest.NewOpenAI(t, func(n int, _ llmtest.Request) llmtest.Turn {
		switch n {
		case 0:
			return llmtest.Turn{Content: "Looking around first.", Calls: []llm.ToolCall{call("list_files", map[string]any{"path": "/workspace"})}}
		case 1:
			<-gate // the run waits here until the test has seen turn 1
			return llmtest.Turn{Content: "All done now.", Calls: []llm.ToolCall{finish("done")}}
		}
		return calls(finish("done"))
	})
	runDone := make(chan int)
	go func() {
		code, _, _ := cli(t, append(openaiArgs(home, srv), "--quiet", "--sandbox", "none", "look around")...)
		runDone <- code
	}()
	var dir string
	waitFor(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(home, "runs", "*", "events.jsonl"))
		if len(m) == 1 {
			dir = filepath.Dir(m[0])
		}
		return dir != ""
	})
	var out, errOut syncBuffer
	logDone := make(chan int)
	go func() {
		logDone <- Run(context.Background(), []string{"log", "--home", home, "--follow", filepath.Base(dir)}, &out, &errOut)
	}()
	waitFor(t, func() bool {
		return strings.Contains(out.String(), "list_files") && strings.Contains(out.String(), "ok")
	})
	if s := out.String(); !strings.Contains(s, "Looking around first.") || strings.Contains(s, "All done now.") || strings.Contains(s, "finished") {
		t.Fatalf("before the second turn:\n%s", s)
	}
	select {
	case <-logDone:
		t.Fatal("log --follow ended while the run was live")
	default:
	}
	close(gate)
	if code := <-runDone; code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	select {
	case code := <-logDone:
		if code != 0 {
			t.Errorf("log --follow: exit %d %s", code, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("log --follow did not end with the run")
	}
	if s := out.String(); !strings.Contains(s, "All done now.") || !strings.Contains(s, "finished completed") {
		t.Errorf("after the run:\n%s", s)
	}
}

// `log --follow` of a run whose process died ends instead of waiting forever.
func TestLogFollowStoppedRun(t *testing.T) {
	home, id := csvDemo(t)
	dead := filepath.Join(home, "runs", "29991231-235959-dead00")
	copyRunWithoutEnd(t, filepath.Join(home, "runs", id), dead)
	done := make(chan int)
	var out, errOut syncBuffer
	go func() {
		done <- Run(context.Background(), []string{"log", "--home", home, "--follow", "latest"}, &out, &errOut)
	}()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errOut.String(), "apodex resume") || !strings.Contains(out.String(), "assistant") {
			t.Errorf("exit %d\n%s%s", code, out.String(), errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("log --follow of a stopped run did not end")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// --log-level debug writes apodex.log into the run directory.
func TestDebugLog(t *testing.T) {
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("done"))))
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "--json", "--log-level", "debug", "--sandbox", "none", "finish")...)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(decodeSummary(t, out).RunDir, LogFile))
	if err != nil || !strings.Contains(string(b), `"msg":"run started"`) || !strings.Contains(string(b), `"msg":"model response"`) {
		t.Errorf("debug log: %v\n%s", err, b)
	}
}
