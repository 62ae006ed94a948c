package runview

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
	if err != nil {
		return false
	}
	_, ok := record.As[record.RunFinished](e)
	return ok
}

// StatusStopped is how a run that can go on is shown: one whose process
// died or was stopped without finishing (the record says running; nobody
// holds its live lock), or one whose run_finished says stopped (a model
// outage, a budget hit).
const StatusStopped = Stopped

// LiveStatus is status as people see it: a running run that no process
// holds is stopped.
func LiveStatus(dir, status string) string {
	if status == StatusRunning && Liveness(dir) == Stopped {
		return StatusStopped
	}
	return status
}

// LoadLive is Load with the status as LiveStatus says.
func LoadLive(dir string) (Info, error) {
	info, err := Load(dir)
	if err != nil {
		return info, err
	}
	info.Status = LiveStatus(dir, info.Status)
	return info, nil
}

// ListLive is List with each status as LiveStatus says.
func ListLive(home string) ([]Row, error) {
	infos, err := List(home)
	for i := range infos {
		infos[i].Status = LiveStatus(infos[i].RunDir, infos[i].Status)
	}
	return infos, err
}
