package progress

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Progress follows a record being written by another goroutine and prints
// one line per step, timed by the record, ending with the run.
func TestFollowPrintsSteps(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := start
	l, err := record.Create(dir, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	done := make(chan error)
	go func() { done <- Follow(context.Background(), dir, 0, &out, Options{}) }()
	step := func(d time.Duration, typ, agent string, p any) {
		clock = start.Add(d)
		l.Append(typ, agent, p)
		time.Sleep(time.Millisecond)
	}
	msg, _ := json.Marshal(llm.Message{Role: llm.RoleAssistant, Content: "Sum the column.\nMore text."})
	step(0, record.TypeRunStarted, "", record.RunStarted{RunID: "r1"})
	step(time.Second, record.TypeModelRetry, "main", record.ModelRetry{Turn: 1, Attempt: 1, Error: "HTTP 503", WaitMS: 2000})
	step(3*time.Second, record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Message: msg, Usage: llm.Usage{TotalTokens: 1234}})
	step(3*time.Second, record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "bash", Arguments: `{"command":"awk 1 f"}`})
	step(4*time.Second, record.TypeToolResult, "main", record.ToolResult{Turn: 1, CallID: "c1", Name: "bash", Output: "exit code: 0\nmore"})
	step(5*time.Second, "message", "user", map[string]any{"id": "M1", "text": "hurry", "class": "priority", "to": "main"})
	step(5*time.Second, "control", "user", map[string]any{"kind": "pause", "result": "paused"})
	step(6*time.Second, record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "completed"})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not end with run_finished")
	}
	got := out.String()
	for _, want := range []string{
		"[1.0s 0 tok] main t1 retry: attempt 1 failed, retrying in 2s: HTTP 503",
		"[3.0s 1.2k tok] main t1 Sum the column.\n",
		"[3.0s 1.2k tok] main t1 bash $ awk 1 f\n[4.0s 1.2k tok] main t1 bash → ok exit 0\n    │ more\n",
		"user message (priority, M1 from -): hurry",
		"control: pause: paused",
		"[6.0s 1.2k tok] finished: completed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "More text") {
		t.Errorf("escape codes or more than the first line:\n%s", got)
	}
	// after (5: up to the tool result) skips what was printed, but still counts tokens and time.
	out.Reset()
	if err := Follow(context.Background(), dir, 5, &out, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "retry") || !strings.Contains(got, "[5.0s 1.2k tok] user message") {
		t.Errorf("after 5:\n%s", got)
	}
}

func TestColourHonoursNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	if Colour(nil) {
		t.Error("colour with NO_COLOR")
	}
	t.Setenv("NO_COLOR", "")
	var b strings.Builder
	if Colour(&b) {
		t.Error("colour on a non-terminal")
	}
}
