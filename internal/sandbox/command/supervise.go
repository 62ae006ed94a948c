package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// DefaultOutputLimit is the per-stream cap when Spec.OutputLimit is 0.
const DefaultOutputLimit = 64 << 10

// DrainGrace bounds how long Run waits for stdout and stderr to reach EOF
// after the process group is gone. Only a process that escaped the group
// (possible with None, via setsid) can hold the pipes that long; its output
// after the grace period is lost.
var DrainGrace = 2 * time.Second

// Capture keeps the first limit bytes written to it and counts all of them.
// It never fails, so the writer on the other end of the pipe never blocks
// on us and never sees EPIPE because of the cap.
type Capture struct {
	limit int
	buf   []byte
	n     int64
}

// NewCapture keeps up to limit bytes.
func NewCapture(limit int) *Capture { return &Capture{limit: limit} }

// Bytes is what was kept.
func (c *Capture) Bytes() []byte { return c.buf }

// Total counts every byte written, including what was cut.
func (c *Capture) Total() int64 { return c.n }

func (c *Capture) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Hooks let a runner act on the started process: Started runs right after
// the start (an error kills the process and fails Run); Kill runs with
// every kill of the process group.
type Hooks struct {
	// Start, if set, runs the process's start (where it must begin, e.g.
	// in a network namespace).
	Start   func(start func() error) error
	Started func(pid int) error
	Kill    func()
}

// Supervise runs cmd (already configured with path, args, dir and env) in its
// own session and process group and applies the shared policy of every runner: the
// timeout, cancellation, output caps, exit status mapping and cleanup.
//
// Sequence: start; wait until the leader has exited without reaping it (so
// its pid, which is the group id, cannot be reused); SIGKILL the whole group,
// which also removes background children the command left behind; reap;
// then wait for the pipes to reach EOF, at most DrainGrace.
func Supervise(ctx context.Context, cmd *exec.Cmd, sp spec.Spec, h *Hooks) (spec.Result, error) {
	if h == nil {
		h = &Hooks{}
	}
	if err := ctx.Err(); err != nil {
		return spec.Result{ExitCode: -1}, fmt.Errorf("sandbox: not started: %w", err)
	}
	if sp.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sp.Timeout)
		defer cancel()
	}
	limit := sp.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer errR.Close()

	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = outW, errW
	if sp.Stdin != nil { // a server speaking over its stdio (Spec.Stdin)
		cmd.Stdin = sp.Stdin
	}
	if sp.Stdout != nil {
		cmd.Stdout = sp.Stdout
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A session of its own, so no controlling terminal: nothing the
	// command starts can open the runtime's terminal as /dev/tty and type
	// into it (TIOCSTI). Its leader leads the process group killGroup
	// kills.
	cmd.SysProcAttr.Setsid = true

	begin := time.Now()
	if h.Start != nil {
		err = h.Start(cmd.Start)
	} else {
		err = cmd.Start()
	}
	outW.Close() // the child has its own copies now
	errW.Close()
	if err != nil {
		return spec.Result{}, fmt.Errorf("sandbox: start %s: %w", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	kill := func() {
		KillGroup(pid)
		if h.Kill != nil {
			h.Kill()
		}
	}
	if h.Started != nil {
		if err := h.Started(pid); err != nil {
			kill()
			_ = cmd.Wait()
			return spec.Result{}, err
		}
	}

	stdout := &Capture{limit: limit}
	stderr := &Capture{limit: limit}
	var drained sync.WaitGroup
	drained.Go(func() { _, _ = io.Copy(stdout, outR) })
	drained.Go(func() { _, _ = io.Copy(stderr, errR) })

	// The watcher owns the kill on ctx end; it stops when the leader exits
	// and is joined before the leader is reaped.
	var killed atomic.Bool
	exited := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			killed.Store(true)
			kill()
		case <-exited:
		}
	}()

	reaped, err := waitExited(cmd)
	if err != nil {
		// Cannot wait without reaping; reap while the watcher still guards
		// ctx, and give up on killing leftovers.
		reaped, err = true, cmd.Wait()
	}
	close(exited)
	<-watcherDone
	if !reaped {
		kill()
		err = cmd.Wait()
	}
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		return spec.Result{}, fmt.Errorf("sandbox: wait: %w", err)
	}

	done := make(chan struct{})
	go func() { drained.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(DrainGrace):
		outR.Close() // unblocks the copies; the late output is lost
		errR.Close()
		<-done
	}

	res := spec.Result{
		Stdout:      stdout.buf,
		Stderr:      stderr.buf,
		StdoutBytes: stdout.n,
		StderrBytes: stderr.n,
		Duration:    time.Since(begin),
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case killed.Load() && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		// Our kill, not the command's own doing.
		res.ExitCode = -1
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.TimedOut = true
			return res, nil
		}
		return res, fmt.Errorf("sandbox: command stopped: %w", ctx.Err())
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
	default:
		res.ExitCode = ws.ExitStatus()
	}
	return res, nil
}

// KillGroup sends SIGKILL to the process group led by pid. ESRCH (nothing
// left) is the normal case after a clean exit.
func KillGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
