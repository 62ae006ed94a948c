package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/apodex/apodex/internal/record"
)

// liveLock is held (flock) by the process running a run, for as long as it
// runs: other processes tell a live run from a stopped one by it.
const liveLock = "run.lock"

// ErrLive: another process is running this run.
var ErrLive = errors.New("run: the run is live in another process")

// lockLive takes the run's live lock; release drops it.
func lockLive(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, liveLock), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run: live lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (%s)", ErrLive, dir)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Liveness of a run as seen from another process.
const (
	Live     = "live"     // a process is running it
	Finished = "finished" // its record is closed
	Stopped  = "stopped"  // not running and not finished: crashed or killed; resumable
)

// Liveness says whether the run in dir is live, finished or stopped.
func Liveness(dir string) string {
	if finished(dir) {
		return Finished
	}
	f, err := os.Open(filepath.Join(dir, liveLock))
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
