package jetstream

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStartCleansUpAfterDeadWorkersOnly: a worker starting on a home
// removes what the runs of a crashed worker (its lock free) left, and
// leaves a live worker's runs alone; two workers cannot share a name on
// one home.
func TestStartCleansUpAfterDeadWorkersOnly(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "workers")
	os.MkdirAll(dir, 0o700)
	for _, w := range []struct{ name, run string }{{"dead", "r-dead"}, {"live", "r-live"}} {
		os.WriteFile(filepath.Join(dir, w.name+".started"), []byte(w.run+"\n"), 0o600)
		if err := os.MkdirAll(filepath.Join(home, "runs", w.run, "world", "ov", "upper"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	live, err := os.OpenFile(filepath.Join(dir, "live.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := syscall.Flock(int(live.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	c, cleaned, err := openCrashLog(home, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if len(cleaned) != 1 || cleaned[0] != "r-dead" {
		t.Fatalf("cleaned %v, want [r-dead]", cleaned)
	}
	if _, err := os.Stat(filepath.Join(home, "runs", "r-dead", "world", "ov")); !os.IsNotExist(err) {
		t.Fatalf("the dead worker's overlay is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "runs", "r-live", "world", "ov")); err != nil {
		t.Fatalf("the live worker's overlay was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "live.started")); err != nil {
		t.Fatalf("the live worker's started file was touched: %v", err)
	}
	if _, _, err := openCrashLog(home, "me"); err == nil {
		t.Fatal("a second worker with the same name on the same home was let in")
	}
}
