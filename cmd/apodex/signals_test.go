package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// TestMain lets a test run this package's test binary as the apodex CLI
// (APODEX_TEST_AS_CLI=1), so signals reach a real process.
// cliProcess starts the CLI as a child process.
func cliProcess(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "APODEX_TEST_AS_CLI=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, &errb, done
}

// blockingModel writes a file on its first call and blocks on the second
// (a model call in flight) until the test ends.
func blockingModel(t *testing.T) (*llmtest.Server, chan struct{}) {
	inFlight, release := make(chan struct{}, 4), make(chan struct{})
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n == 0 {
			return calls(call("write_file", map[string]any{"path": "/workspace/a.txt", "content": "one\n"}))
		}
		inFlight <- struct{}{}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		return calls(finish("late"))
	})
	t.Cleanup(func() { close(release) }) // before the server's own cleanup waits for its handlers
	return srv, inFlight
}

func waitOrFail(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestCtrlCStopsResumably(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	srv, inFlight := blockingModel(t)
	cmd, errb, done := cliProcess(t, append(openaiArgs(home, srv), "--quiet", "write a.txt")...)
	waitOrFail(t, inFlight, "the second model call")
	cmd.Process.Signal(os.Interrupt)
	waitOrFail(t, done, "the run to stop")
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errb.String(), "press Ctrl-C again to cancel it for good") || !strings.Contains(errb.String(), "apodex resume") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
	dir := onlyRun(t, home)
	evs := runtest.Events(t, dir)
	last := evs[len(evs)-1]
	if last.Type != record.TypeWarning || !strings.Contains(string(last.Raw), `"stopped"`) {
		t.Fatalf("the record ends with %s: %s", last.Type, last.Raw)
	}
	code, out, _ := cli(t, "show", "--home", home, filepath.Base(dir))
	if code != 0 || !strings.Contains(out, "stopped") {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	good := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn { return calls(finish("a.txt written")) })
	code, out, errOut := cli(t, "resume", "--home", home, "--base-url", good.URL, "--json", "--quiet", filepath.Base(dir))
	if code != 0 || decodeSummary(t, out).Termination != "completed" {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	resumed := decodeAll[record.Resumed](t, runtest.Events(t, dir), record.TypeResumed)
	if len(resumed) != 1 || !strings.Contains(resumed[0].Reason, "Ctrl-C") {
		t.Fatalf("resumed %+v", resumed)
	}
	if code, out, errOut := cli(t, "replay", "--home", home, filepath.Base(dir)); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("replay of a run stopped by Ctrl-C and resumed: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestSecondCtrlCCancelsForGood(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	srv, inFlight := blockingModel(t)
	cmd, errb, done := cliProcess(t, append(openaiArgs(home, srv), "--quiet", "write a.txt")...)
	waitOrFail(t, inFlight, "the second model call")
	cmd.Process.Signal(os.Interrupt)
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	waitOrFail(t, done, "the run to end")
	dir := onlyRun(t, home)
	evs := runtest.Events(t, dir)
	fin := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
	if len(fin) != 1 || fin[0].Termination != "cancelled" {
		t.Fatalf("run_finished %+v\nstderr:\n%s", fin, errb.String())
	}
	if code, _, errOut := cli(t, "resume", "--home", home, filepath.Base(dir)); code == 0 || !strings.Contains(errOut, "nothing to resume") {
		t.Fatalf("resume of a cancelled run: exit %d: %s", code, errOut)
	}
}

func TestSIGTERMStopsAtOnce(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	srv, inFlight := blockingModel(t)
	cmd, errb, done := cliProcess(t, append(openaiArgs(home, srv), "--quiet", "write a.txt")...)
	waitOrFail(t, inFlight, "the second model call")
	cmd.Process.Signal(syscall.SIGTERM)
	waitOrFail(t, done, "the run to stop")
	dir := onlyRun(t, home)
	if fin := decodeAll[record.RunFinished](t, runtest.Events(t, dir), record.TypeRunFinished); len(fin) != 0 {
		t.Fatalf("SIGTERM finished the run: %+v\n%s", fin, errb.String())
	}
	if !strings.Contains(errb.String(), "apodex resume") {
		t.Fatalf("stderr:\n%s", errb.String())
	}
}
