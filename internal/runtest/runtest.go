// Package runtest is the one test harness of the runtime's packages: the
// planes of a run in a temporary directory, a record closed when the test
// ends, the record read back, the sandbox a test needs, a fake clock. It
// imports none of the packages that run agents, so the tests of any of
// them (publish, agent, team, run, the CLI) can use it.
package runtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/workspace"
)

// Planes makes /inputs, /workspace and /outputs under dir.
func Planes(t testing.TB, dir string) *workspace.FS {
	t.Helper()
	fs := &workspace.FS{
		Inputs:    filepath.Join(dir, "inputs"),
		Workspace: filepath.Join(dir, "workspace"),
		Outputs:   filepath.Join(dir, "outputs"),
	}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// Record creates the record of a run in dir, closed when the test ends.
func Record(t testing.TB, dir string) *record.Log {
	t.Helper()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return log
}

// Events reads the record in dir back; a torn tail fails the test.
func Events(t testing.TB, dir string) []record.Event {
	t.Helper()
	c, err := record.Read(dir)
	if err != nil {
		t.Fatalf("reading the record: %v", err)
	}
	if c.TornTail {
		t.Fatal("the record has a torn tail")
	}
	return c.Events
}

// OfType keeps the events of type typ.
func OfType(events []record.Event, typ string) []record.Event {
	var out []record.Event
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// NeedSandbox skips a test whose meaning depends on real isolation
// (bubblewrap, or the native backend where bubblewrap is missing).
func NeedSandbox(t testing.TB) {
	t.Helper()
	if _, err := sandbox.New(sandbox.KindAuto); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
}

// SandboxKind is the sandbox the tests' runs ask for: auto (bubblewrap
// when it is there, else native).
func SandboxKind() string { return sandbox.KindAuto }

// Start is the fake clock's starting time.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock at Start: a test moves it with Advance.
func Clock() *clock.Fake { return clock.NewFake(Start) }
