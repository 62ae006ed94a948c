package jetstream

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/worktree"
)

// A worker keeps, per home, <home>/workers/<name>.lock (an flock held
// while it runs) and <name>.started (the run ids it started, one a line).
// At start it cleans up after every worker of the home whose lock nobody
// holds: a crashed one (kill -9, power loss) left overlays mounted and
// sandboxes behind in those runs.
type crashLog struct {
	lock    *os.File
	started *os.File
	dir     string
	name    string
}

// openCrashLog takes the worker's lock, cleans up after dead workers of
// the home, and opens the worker's started file.
func openCrashLog(home, name string) (*crashLog, []string, error) {
	dir := filepath.Join(home, "workers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	if strings.ContainsAny(name, `/\`) || name == "" || strings.HasPrefix(name, ".") {
		return nil, nil, fmt.Errorf("jetstream: worker name %q: use letters, digits, '-' and '_'", name)
	}
	lock, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("jetstream: a worker named %s runs on this home already; pass another --name", name)
	}
	cleaned := cleanupDead(home, dir)
	started, err := os.OpenFile(filepath.Join(dir, name+".started"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	return &crashLog{lock: lock, started: started, dir: dir, name: name}, cleaned, nil
}

// cleanupDead removes the overlays of the runs of every worker whose lock
// is free, then its files; it returns the run ids it cleaned.
func cleanupDead(home, dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.started"))
	var cleaned []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".started")
		lp := filepath.Join(dir, name+".lock")
		l, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			continue
		}
		if syscall.Flock(int(l.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			l.Close() // alive
			continue
		}
		if raw, err := os.Open(f); err == nil {
			sc := bufio.NewScanner(raw)
			for sc.Scan() {
				if id := strings.TrimSpace(sc.Text()); validRunID(id) {
					worktree.Cleanup(filepath.Join(home, "runs", id, "world"))
					cleaned = append(cleaned, id)
				}
			}
			raw.Close()
		}
		os.Remove(f)
		l.Close()
	}
	return cleaned
}

func (c *crashLog) add(runID string) {
	c.started.Write([]byte(runID + "\n"))
	c.started.Sync()
}

// close ends a clean stop: nothing is left to clean up.
func (c *crashLog) close() {
	c.started.Close()
	os.Remove(filepath.Join(c.dir, c.name+".started"))
	c.lock.Close()
}
