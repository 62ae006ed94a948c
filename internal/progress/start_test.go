package progress

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// lockedBuilder is a strings.Builder safe for the follower and the test.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestStartStopsAtTheRecordsEnd(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := record.Create(dir, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r1"})
	l.Append(record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "completed"})
	l.Close()
	var out lockedBuilder
	ctx, cancel := context.WithCancel(context.Background())
	stop := Start(ctx, dir, 0, &out, Options{})
	cancel() // Ctrl-C does not end the follower: the end is still printed
	stop(true)
	if got := out.b.String(); !strings.Contains(got, "finished: completed") {
		t.Errorf("progress:\n%s", got)
	}
}

func TestStartNeverStartedPrintsNothing(t *testing.T) {
	var out lockedBuilder
	stop := Start(context.Background(), t.TempDir(), 0, &out, Options{})
	stop(false)
	if got := out.b.String(); got != "" {
		t.Errorf("a run that never started printed %q", got)
	}
}

// StartLog prints from the run's own log, in memory: what is appended
// after it started is printed, and the log's close ends it.
func TestStartLogPrintsFromTheLog(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := record.Create(dir, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r1"})
	var out lockedBuilder
	stop := New(&out, Options{}).StartLog(context.Background(), l, 0)
	l.Append(record.TypeToolCall, "main", record.ToolCall{CallID: "c1", Name: "bash", Turn: 1, Arguments: `{"command":"echo hi"}`})
	l.Append(record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "completed"})
	l.Close()
	stop(true)
	got := out.b.String()
	if !strings.Contains(got, "echo hi") || !strings.Contains(got, "finished: completed") {
		t.Errorf("progress:\n%s", got)
	}
}
