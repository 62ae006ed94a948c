package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
)

// The README's team example, as a new user runs it: progress prints each
// call when it starts and its result when it ends, under the agent that
// made it, and bash's result shows the command's output (issue #28: A1's
// command was shown under A2, and only "→ ok exit code: 0").
func TestTeamProgressNamesTheAgentAndShowsOutput(t *testing.T) {
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--mode", "team", "--script", "../../examples/team-csv/script.json",
		"--inputs", "../../examples/team-csv/inputs", "Sum north and south and report")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		// A1 sums north (361.75), A2 south (201.25): each start line, then its result with the output below.
		`(?m)^\[[^]]+\] A1 t1 bash \$ awk .*/inputs/north\.csv \| tee /workspace/north\.txt$`,
		`(?m)^\[[^]]+\] A2 t1 bash \$ awk .*/inputs/south\.csv \| tee /workspace/south\.txt$`,
		`(?m)^\[[^]]+\] A1 t1 bash .*→ ok exit 0.*\n    │ 361\.75$`,
		`(?m)^\[[^]]+\] A2 t1 bash .*→ ok exit 0.*\n    │ 201\.25$`,
		`(?m)^\[[^]]+\] A3 t1 bash \$ echo north=.*\n(.*\n)*\[[^]]+\] A3 t1 bash .*→ ok exit 0.*\n    │ north=361\.75 south=201\.25$`,
		`(?m)^\[[^]]+\] lead t1 list_files path=/inputs$`,
	} {
		if !regexp.MustCompile(want).MatchString(errOut) {
			t.Errorf("progress lacks %s:\n%s", want, errOut)
		}
	}
	for _, l := range strings.Split(errOut, "\n") {
		if strings.Contains(l, " bash ") && (strings.Contains(l, "north.csv") && !strings.Contains(l, " A1 ") || strings.Contains(l, "south.csv") && !strings.Contains(l, " A2 ")) {
			t.Errorf("a command under another agent: %s", l)
		}
	}
}

// openPTY opens a pseudo-terminal: the side a program writes to (a
// terminal, as stderr is for a user) and the side that reads it.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlockpt: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Skipf("ptsname: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the terminal: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

// On a terminal, the text the model streams is shown as it arrives (the
// clients hand it to the progress printer through the context), on a
// status line the next progress line takes back.
func TestProgressStreamsTextOnATerminal(t *testing.T) {
	term, reader := openPTY(t)
	var got strings.Builder
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := reader.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	srv := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Content: "Streaming these words to the terminal.", Calls: []llm.ToolCall{finish("done")}}))
	home := t.TempDir()
	t.Setenv("NO_COLOR", "1")
	var out bytes.Buffer
	code := Run(context.Background(), append(openaiArgs(home, srv), "objective"), &out, term)
	time.Sleep(200 * time.Millisecond)
	term.Close()
	reader.Close()
	<-read
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), got.String())
	}
	text := got.String()
	if !strings.Contains(text, "\x1b[Kmain ✎ Streaming th") {
		t.Errorf("the streamed text was not shown on the status line:\n%q", text)
	}
	if !strings.Contains(text, "main t1 Streaming these words to the terminal.") || !strings.Contains(text, "finished: completed") {
		t.Errorf("progress lines:\n%q", text)
	}
}
