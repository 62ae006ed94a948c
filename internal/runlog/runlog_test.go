package runlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewWaitsForTheRunDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r-1")
	lvl, err := ParseLevel("debug")
	if err != nil {
		t.Fatal(err)
	}
	lg, closeLog := New(dir, lvl)
	lg.Debug("before")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the log created %s before the run did (%v)", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lg.Info("after")
	closeLog()
	raw, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `"before"`) || !strings.Contains(lines[1], `"after"`) {
		t.Errorf("log:\n%s", raw)
	}
}

func TestNeverStartedLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r-2")
	lg, closeLog := New(dir, 0)
	lg.Info("x")
	closeLog()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a run that never started left %s (%v)", dir, err)
	}
}

func TestParseLevelRefusesUnknown(t *testing.T) {
	if _, err := ParseLevel("loud"); err == nil || !strings.Contains(err.Error(), "use debug, info, warn or error") {
		t.Errorf("ParseLevel(loud) = %v", err)
	}
}
