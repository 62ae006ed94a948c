package runinfo

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/apodex/apodex/internal/record"
)

// LockFile is held (flock) by the process running a run, for as long as it
// runs: other processes tell a live run from a stopped one by it.
const LockFile = "run.lock"

// Liveness of a run as seen from another process.
const (
	Live     = "live"     // a process is running it
	Finished = "finished" // its record is closed
	Stopped  = "stopped"  // not running and not finished: crashed or killed; resumable
)

// Status of a run as shown to users.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusRunning   = "running" // no run_finished yet: live, or interrupted
	// StatusAwaitingReview: everything else passed and a human clause
	// waits for apodex review (a review event decides it).
	StatusAwaitingReview = "awaiting_review"
)

// Liveness says whether the run in dir is live, finished or stopped.
func Liveness(dir string) string {
	if finished(dir) {
		return Finished
	}
	f, err := os.Open(filepath.Join(dir, LockFile))
	if err != nil {
		return Stopped
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return Live
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return Stopped
}

// finished reports whether the record ends with run_finished.
func finished(dir string) bool {
	e, err := record.Last(dir)
	return err == nil && e.Type == record.TypeRunFinished
}
