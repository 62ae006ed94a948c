package crashtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// child is an apodex process the test can freeze, inspect and kill.
type child struct {
	cmd         *exec.Cmd
	out, errOut bytes.Buffer // stdout, stderr; read only after done
	done        chan struct{}
	tids        []int // its threads, as last seen
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(apodexBin, args...), done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.errOut
	c.cmd.Env = append(os.Environ(), "USER=crashtest")
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start apodex %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.exited() {
			c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// output is what the process printed, stdout then stderr.
func (c *child) output() string {
	<-c.done
	return c.out.String() + c.errOut.String()
}

// exitCode waits for the process and returns its exit code (-1 if killed).
func (c *child) exitCode() int {
	<-c.done
	return c.cmd.ProcessState.ExitCode()
}

// freeze stops the process (SIGSTOP) and waits until every one of its
// threads is stopped; it reports false when the process has exited.
func (c *child) freeze(t *testing.T) bool {
	t.Helper()
	if c.exited() {
		return false
	}
	pid := c.cmd.Process.Pid
	// SIGSTOP to the process wakes one thread, often an idle one that must
	// first be scheduled, while the busy ones run on for a millisecond or
	// more; sent to every thread, it stops the busy ones at once. The
	// threads known from the last time go first; new ones after.
	for _, tid := range c.tids {
		syscall.Tgkill(pid, tid, syscall.SIGSTOP)
	}
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	c.tids = c.tids[:0]
	for _, tk := range tasks {
		if tid, err := strconv.Atoi(tk.Name()); err == nil {
			c.tids = append(c.tids, tid)
			syscall.Tgkill(pid, tid, syscall.SIGSTOP)
		}
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		switch threadsStopped(pid) {
		case stoppedAll:
			return true
		case stoppedGone:
			return false
		}
		if c.exited() {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("apodex pid %d did not stop within 10 s of SIGSTOP", pid)
		}
		time.Sleep(5 * time.Microsecond)
	}
}

// thaw lets a frozen process go on.
func (c *child) thaw() {
	if !c.exited() {
		syscall.Kill(c.cmd.Process.Pid, syscall.SIGCONT)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (c *child) kill() {
	if !c.exited() {
		syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-c.done
}

const (
	stoppedAll = iota
	stoppedSome
	stoppedGone
)

// threadsStopped reads the state of every thread of pid from /proc.
func threadsStopped(pid int) int {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		return stoppedGone
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		switch b[i+2] {
		case 'T', 't':
		case 'Z', 'X':
			return stoppedGone
		default:
			return stoppedSome
		}
	}
	return stoppedAll
}

// strays lists the processes, other than the test's own children, whose
// command line names dir: sandboxed commands that outlived their run.
func strays(dir string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

// noStrays waits up to 5 s for the processes of a killed run to go.
func noStrays(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := strays(dir)
		if len(s) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the killed run are still alive 5 s after SIGKILL:\n%s", strings.Join(s, "\n"))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runUntil lets c run in short slices until stop, called with c frozen,
// returns true; it returns false when c exits first.
func (c *child) runUntil(t *testing.T, step time.Duration, stop func() bool) bool {
	t.Helper()
	for {
		if !c.freeze(t) {
			return false
		}
		if stop() {
			return true
		}
		c.thaw()
		spin(step)
	}
}

// spin waits d without sleeping: a sleep lasts at least a timer tick,
// in which the child may write several events.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
