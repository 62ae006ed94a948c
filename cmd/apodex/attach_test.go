package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// `apodex attach RUN` follows a live run and sends what the user types: a
// line as a message, /budget, /pause and /resume as controls; the run gets
// them before its next model call, and attach ends with the run.
func TestAttachSendsWhatTheUserTypes(t *testing.T) {
	release, asked := make(chan struct{}), make(chan struct{})
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn { // called under the server's lock
		switch n {
		case 0:
			close(asked)
			<-release // the run is live, in its first model call, while the user types
			return calls(bash("echo counted 3 rows"))
		case 1:
			for _, m := range req.Messages {
				if m.Role == "user" && strings.Contains(m.Content, "also name the file") {
					return calls(finish("3 rows, in data.csv"))
				}
			}
			return calls(finish("the message never arrived"))
		}
		return calls(finish("done"))
	})
	home := t.TempDir()
	done := make(chan int)
	var runErr syncBuffer
	go func() {
		done <- Run(context.Background(), append(openaiArgs(home, srv), "--quiet", "count the rows"), io.Discard, &runErr)
	}()
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatalf("the run did not start\n%s", runErr.String())
	}
	dir := onlyRun(t, home)
	in, typed := io.Pipe()
	var out syncBuffer
	attached := make(chan int)
	go func() {
		attached <- Run(cmdline.WithStdin(context.Background(), in), []string{"attach", "--home", home, "latest"}, &out, io.Discard)
	}()
	for _, l := range []string{"please also name the file", "/budget turns=+5", "/pause", "/resume", "/frobnicate"} {
		io.WriteString(typed, l+"\n")
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "unknown command /frobnicate"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("attach did not take the lines:\n%s", out.String())
		}
	}
	close(release)
	if code := <-done; code != 0 {
		t.Fatalf("run: exit %d\n%s", code, runErr.String())
	}
	select {
	case code := <-attached:
		if code != 0 {
			t.Errorf("attach: exit %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("attach did not end with the run")
	}
	typed.Close()
	got := out.String()
	for _, want := range []string{"attached to run ", "sent M1", "budget change sent: turns=+5", "pause sent", "resume sent",
		"main t1 bash $ echo counted 3 rows", "    │ counted 3 rows", "finished: completed"} {
		if !strings.Contains(got, want) {
			t.Errorf("attach printed no %q:\n%s", want, got)
		}
	}
	msgs, _ := inbox.List(dir)
	if len(msgs) != 1 || msgs[0].Text != "please also name the file" {
		t.Errorf("messages %+v", msgs)
	}
	var kinds []string
	for _, c := range decodeAll[record.Control](t, runtest.Events(t, dir), record.TypeControl) {
		kinds = append(kinds, c.Kind)
	}
	if !slices.Equal(kinds, []string{"budget", "pause", "resume"}) {
		t.Errorf("controls applied: %v", kinds)
	}
	// A finished run has nothing to attach to.
	code, _, errOut := cli(t, "attach", "--home", home, "latest")
	if code != 1 || !strings.Contains(errOut, "has finished (completed, completed)") {
		t.Errorf("attach to a finished run: exit %d %s", code, errOut)
	}
}
