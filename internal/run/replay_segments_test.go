package run_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/replay"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
)

// cancelledRun runs an agent whose second command sleeps until `apodex
// cancel` (sent once the command is recorded) ends the run.
func cancelledRun(t *testing.T) run.Summary {
	t.Helper()
	var dir string
	cfg := config(t, "cancelled", func(turn int, _ *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			return scripted.Calls(call("bash", map[string]string{"command": "echo one > a.txt"})), nil
		case 1:
			go cancelOnceRecorded(t, dir, 2)
			return scripted.Calls(call("bash", map[string]string{"command": "sleep 30; echo two > b.txt"})), nil
		}
		return scripted.Calls(finish("not reached")...), nil
	})
	dir = filepath.Join(cfg.Home, "runs", "cancelled")
	cfg.Sandbox = runtest.SandboxKind()
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Termination != "cancelled" || len(s.Files) != 1 {
		t.Fatalf("the run was not cancelled in its second command: %+v", s)
	}
	return s
}

// cancelOnceRecorded sends a cancel once the record holds n tool calls.
func cancelOnceRecorded(t *testing.T, dir string, n int) {
	waitForCalls(dir, n)
	if err := inbox.Control(dir, inbox.ControlCancel, nil); err != nil {
		t.Error(err)
	}
}

// waitForCalls returns once the record in dir holds n tool calls.
func waitForCalls(dir string, n int) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		c, err := record.Read(dir)
		if err == nil && len(runtest.OfType(c.Events, record.TypeToolCall)) >= n {
			return
		}
	}
}

// The cancel is replayed where it came: the sleeping command is cut off
// again (its result and the missing b.txt are as recorded) instead of
// running to its end, and no turn is asked for after it.
func TestReplayOfACancelledRun(t *testing.T) {
	runtest.NeedSandbox(t)
	s := cancelledRun(t)
	rep := replayOf(t, s.RunDir)
	mustBeIdentical(t, rep)
	if rep.Compared.ToolCalls != 2 || rep.Compared.FinalFiles != 1 {
		t.Errorf("compared %+v", rep.Compared)
	}
}

// killedAndResumed runs an agent that is stopped as a kill would stop it in
// its second command (the record cut after that call), then resumed: its
// third command and its finish come after the resume. The cut-off command
// does nothing before its sleep: how far it got is not in the record.
func killedAndResumed(t *testing.T) run.Summary {
	t.Helper()
	var dir string
	halt := make(chan struct{})
	var mu sync.Mutex
	n := 0 // the model's calls: its turn numbers start again at the resume
	cfg := config(t, "resumed", func(int, *llm.Request) (*llm.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		switch n {
		case 1:
			return scripted.Calls(call("bash", map[string]string{"command": "echo one > a.txt"})), nil
		case 2:
			go func() { waitForCalls(dir, 2); close(halt) }()
			return scripted.Calls(call("bash", map[string]string{"command": "sleep 30; echo late > late.txt"})), nil
		case 3:
			return scripted.Calls(call("bash", map[string]string{"command": "ls; echo three > c.txt"})), nil
		}
		return scripted.Calls(finish("wrote a, b and c")...), nil
	})
	dir = filepath.Join(cfg.Home, "runs", "resumed")
	cfg.Sandbox, cfg.Halt = runtest.SandboxKind(), halt
	if _, err := run.Execute(context.Background(), cfg); !errors.Is(err, run.ErrHalted) {
		t.Fatalf("the first segment ended with %v, want run.ErrHalted", err)
	}
	if l := runview.Liveness(dir); l != runview.Stopped {
		t.Fatalf("a halted run is %s, want stopped", l)
	}
	cutAfterLast(t, dir, record.TypeToolCall)
	cfg.Halt = nil
	s, err := run.Resume(context.Background(), dir, run.ResumeConfig{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusCompleted || len(s.Files) != 2 {
		t.Fatalf("the resumed run: %+v", s)
	}
	return s
}

// cutAfterLast truncates the record after its last event of type typ, as a
// kill right after it leaves it.
func cutAfterLast(t *testing.T, dir, typ string) {
	t.Helper()
	path := filepath.Join(dir, record.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(data, []byte(`"type":"`+typ+`"`))
	if i < 0 {
		t.Fatalf("no %s in the record", typ)
	}
	end := bytes.IndexByte(data[i:], '\n')
	if err := record.Cut(dir, bytes.Count(data[:i+end+1], []byte("\n"))); err != nil {
		t.Fatal(err)
	}
}

// A resumed run replays its two segments: the call the stop cut off is
// interrupted again (not run to its end: no late.txt), the replay resumes
// from its own record, and the rest matches.
func TestReplayOfAResumedRun(t *testing.T) {
	runtest.NeedSandbox(t)
	s := killedAndResumed(t)
	rep, err := replay.Run(context.Background(), s.RunDir, replay.Config{TempDir: t.TempDir(), Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Identical || rep.Divergence != nil || len(rep.Notes) > 0 {
		t.Fatalf("replay diverged: %+v\nnotes: %v", rep.Divergence, rep.Notes)
	}
	// The interrupted call has no result, in the original as in the replay.
	if rep.Compared.ToolCalls != 4 || rep.Compared.Observations != 3 || rep.Compared.FinalFiles != 2 {
		t.Errorf("compared %+v; the run made 4 tool calls, one cut off", rep.Compared)
	}
	c, err := record.Read(rep.ReplayDir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(runtest.OfType(c.Events, record.TypeResumed)); n != 1 {
		t.Errorf("the replay resumed %d times, want once", n)
	}
	if _, err := os.Stat(filepath.Join(rep.ReplayDir, "workspace", "late.txt")); err == nil {
		t.Errorf("the interrupted command ran to its end in the replay")
	}
}
