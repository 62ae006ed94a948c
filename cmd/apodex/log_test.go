package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
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
	// An agent the run does not have is a usage error naming those it has.
	code, out, errOut = cli(t, "log", "--home", home, "--agent", "nobody", id)
	if code != 2 || out != "" || !strings.Contains(errOut, `has no agent "nobody"; its agents: main`) {
		t.Errorf("--agent nobody: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := cli(t, "log", "--home", home, "--agent", "main", id); code != 0 || !strings.Contains(out, "── main") {
		t.Errorf("--agent main: exit %d\n%s", code, out)
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
	b, err := os.ReadFile(filepath.Join(decodeSummary(t, out).RunDir, runflags.LogFile))
	if err != nil || !strings.Contains(string(b), `"msg":"run started"`) || !strings.Contains(string(b), `"msg":"model response"`) {
		t.Errorf("debug log: %v\n%s", err, b)
	}
}

// copyTree copies a run directory as it is at this moment: a copy of a
// live run is a run whose process died at this point (nobody holds its lock).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// After a crash and a resume, log reads like a transcript: the call the
// stop cut off shows "interrupted" under its agent, and the resume is a
// note in place in the agent's section, before the turns that followed it
// (not at the end). Before the resume the cut call shows interrupted too.
func TestLogAfterAResume(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	first := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n == 0 {
			return calls(bash("sleep 30; echo never"))
		}
		return calls(finish("cancelled anyway"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- Run(ctx, append(openaiArgs(home, first), "--quiet", "sleep"), io.Discard, io.Discard) }()
	var src string
	waitFor(t, func() bool {
		if src == "" {
			src, _ = cmdline.FindRun(home, "latest")
		}
		return src != "" && strings.Contains(fileContent(t, filepath.Join(src, record.EventsFile)), `"type":"tool_call"`)
	})
	dead := filepath.Join(home, "runs", "29991231-235959-dead00")
	copyTree(t, src, dead)
	cancel()
	<-done

	_, before, _ := cli(t, "log", "--home", home, "29991231-235959-dead00")
	if !strings.Contains(before, "▸ bash $ sleep 30; echo never\n    interrupted bash\n    │ interrupted: the process stopped while this call ran; `apodex resume` continues the run") {
		t.Errorf("log of the stopped run does not show the cut call as interrupted:\n%s", before)
	}
	second := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Content: "The sleep was cut off; finishing.", Calls: []llm.ToolCall{finish("resumed and done")}}))
	if code, out, errOut := cli(t, "resume", "--home", home, "--base-url", second.URL, "--quiet", "29991231-235959-dead00"); code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	_, after, _ := cli(t, "log", "--home", home, "29991231-235959-dead00")
	want := regexp.MustCompile(`(?s)▸ bash \$ sleep 30; echo never\n    interrupted bash\n    │ interrupted: the process stopped while this call ran \(it may or may not have taken effect\); the agent was told so when the run resumed\nresumed after event \d+: the process stopped without finishing.*\nassistant \(turn 2\): The sleep was cut off; finishing\.`)
	if !want.MatchString(after) {
		t.Errorf("log after the resume: want the interrupted call, then the resume, then turn 2, in main's section:\n%s", after)
	}
	if i, j := strings.Index(after, "resumed after event"), strings.Index(after, "finished "); i < 0 || j < i || strings.Count(after, "resumed after event") != 1 {
		t.Errorf("the resume note is not in place (once, before the end):\n%s", after)
	}
}
