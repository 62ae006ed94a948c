package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/apodex/apodex/internal/runview"
)

// ErrLive: another process is running this run.
var ErrLive = errors.New("run: the run is live in another process")

// lockLive takes the run's live lock (runview.LockFile); release drops it.
func lockLive(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, runview.LockFile), os.O_CREATE|os.O_RDWR, 0o644)
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
