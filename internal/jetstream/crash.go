package jetstream

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/worktree"
)

// A worker keeps, per home, <home>/workers/<name>.lock (an flock held
// while it runs) and <name>.started: a line "<run id>\t<job JSON>" when
// it starts a run, "-<run id>" once the run's result or abandonment is
// published. At start it cleans up after every worker of the home whose
// lock nobody holds: a crashed one (kill -9, power loss) left overlays
// mounted and sandboxes behind in those runs, and its runs that never
// ended are abandoned.
type crashLog struct {
	lock    *os.File
	started *os.File
	dir     string
	name    string
}

// deadRun is a run a dead worker started and never ended.
type deadRun struct {
	ID  string
	Job *eval.Job // nil in a line of an older version
}

// openCrashLog takes the worker's lock, cleans up after dead workers of
// the home, and opens the worker's started file; it returns the runs it
// cleaned and those of them that never ended.
func openCrashLog(home, name string) (*crashLog, []string, []deadRun, error) {
	dir := filepath.Join(home, "workers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, nil, err
	}
	if strings.ContainsAny(name, `/\`) || name == "" || strings.HasPrefix(name, ".") {
		return nil, nil, nil, fmt.Errorf("jetstream: worker name %q: use letters, digits, '-' and '_'", name)
	}
	lock, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, nil, nil, fmt.Errorf("jetstream: a worker named %s runs on this home already; pass another --name", name)
	}
	cleaned, unended := cleanupDead(home, dir)
	started, err := os.OpenFile(filepath.Join(dir, name+".started"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		lock.Close()
		return nil, nil, nil, err
	}
	return &crashLog{lock: lock, started: started, dir: dir, name: name}, cleaned, unended, nil
}

// cleanupDead removes the overlays of the runs of every worker whose lock
// is free, then its files; it returns the run ids it cleaned and the runs
// among them that never ended.
func cleanupDead(home, dir string) ([]string, []deadRun) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.started"))
	var cleaned []string
	var unended []deadRun
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
		var runs []deadRun
		ended := map[string]bool{}
		if raw, err := os.Open(f); err == nil {
			sc := bufio.NewScanner(raw)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if id, ok := strings.CutPrefix(line, "-"); ok {
					ended[id] = true
					continue
				}
				id, rest, _ := strings.Cut(line, "\t")
				if !validRunID(id) {
					continue
				}
				r := deadRun{ID: id}
				if j := new(eval.Job); json.Unmarshal([]byte(rest), j) == nil && j.Eval != "" {
					r.Job = j
				}
				runs = append(runs, r)
			}
			raw.Close()
		}
		for _, r := range runs {
			worktree.Cleanup(filepath.Join(home, "runs", r.ID, "world"))
			cleaned = append(cleaned, r.ID)
			if !ended[r.ID] {
				unended = append(unended, r)
			}
		}
		os.Remove(f)
		l.Close()
	}
	return cleaned, unended
}

func (c *crashLog) add(runID string, j eval.Job) {
	raw, _ := json.Marshal(j)
	c.started.Write([]byte(runID + "\t" + string(raw) + "\n"))
	c.started.Sync()
}

// end notes that run runID's result or abandonment is published.
func (c *crashLog) end(runID string) {
	c.started.Write([]byte("-" + runID + "\n"))
}

// close ends a clean stop: nothing is left to clean up.
func (c *crashLog) close() {
	c.started.Close()
	os.Remove(filepath.Join(c.dir, c.name+".started"))
	c.lock.Close()
}
