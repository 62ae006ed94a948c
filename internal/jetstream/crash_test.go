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
// one home. The dead worker's runs that never ended are returned to be
// abandoned.
func TestStartCleansUpAfterDeadWorkersOnly(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "workers")
	os.MkdirAll(dir, 0o700)
	job := `{"eval":"e-1","world":{"id":"w-1"},"config":{"name":"c"},"rollout":2,"version":"v"}`
	for _, w := range []struct{ name, lines string }{
		{"dead", "r-done\t" + job + "\nr-dead\t" + job + "\n-r-done\n"},
		{"live", "r-live\t" + job + "\n"},
	} {
		os.WriteFile(filepath.Join(dir, w.name+".started"), []byte(w.lines), 0o600)
	}
	for _, run := range []string{"r-done", "r-dead", "r-live"} {
		if err := os.MkdirAll(filepath.Join(home, "runs", run, "world", "ov", "upper"), 0o755); err != nil {
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

	c, cleaned, unended, err := openCrashLog(home, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if len(cleaned) != 2 || cleaned[0] != "r-done" || cleaned[1] != "r-dead" {
		t.Fatalf("cleaned %v, want [r-done r-dead]", cleaned)
	}
	// Only the run that never ended is abandoned, with the rollout it ran.
	if len(unended) != 1 || unended[0].ID != "r-dead" || unended[0].Job == nil || unended[0].Job.Eval != "e-1" || unended[0].Job.Rollout != 2 {
		t.Fatalf("unended %+v, want r-dead of e-1 rollout 2", unended)
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
	if _, _, _, err := openCrashLog(home, "me"); err == nil {
		t.Fatal("a second worker with the same name on the same home was let in")
	}
}
