package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// defaultOutputLimit is the per-stream cap when Spec.OutputLimit is 0.
const defaultOutputLimit = 64 << 10

// drainGrace bounds how long Run waits for stdout and stderr to reach EOF
// after the process group is gone. Only a process that escaped the group
// (possible with None, via setsid) can hold the pipes that long; its output
// after the grace period is lost.
var drainGrace = 2 * time.Second

// defaultEnv is the environment when Spec.Env is nil.
var defaultEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
}

// envOf returns the environment a spec asks for, checked.
func envOf(spec Spec) ([]string, error) {
	if spec.Env == nil {
		return defaultEnv, nil
	}
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("sandbox: env entry %q is not KEY=VALUE", kv)
		}
	}
	return spec.Env, nil
}

// capture keeps the first limit bytes written to it and counts all of them.
// It never fails, so the writer on the other end of the pipe never blocks
// on us and never sees EPIPE because of the cap.
type capture struct {
	limit int
	buf   []byte
	n     int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// supervise runs cmd (already configured with path, args, dir and env) in its
// own session and process group and applies the shared policy of every runner: the
// timeout, cancellation, output caps, exit status mapping and cleanup.
//
// Sequence: start; wait until the leader has exited without reaping it (so
// its pid, which is the group id, cannot be reused); SIGKILL the whole group,
// which also removes background children the command left behind; reap;
// then wait for the pipes to reach EOF, at most drainGrace.
// hooks let a runner act on the started process: started runs right after
// the start (an error kills the process and fails Run); kill runs with
// every kill of the process group.
type hooks struct {
	// start, if set, runs the process's start (where it must begin, e.g.
	// in a network namespace).
	start   func(start func() error) error
	started func(pid int) error
	kill    func()
}

func supervise(ctx context.Context, cmd *exec.Cmd, spec Spec, h *hooks) (Result, error) {
	if h == nil {
		h = &hooks{}
	}
	if err := ctx.Err(); err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("sandbox: not started: %w", err)
	}
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	limit := spec.OutputLimit
	if limit <= 0 {
		limit = defaultOutputLimit
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer errR.Close()

	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = outW, errW
	if spec.Stdin != nil { // a server speaking over its stdio (Spec.Stdin)
		cmd.Stdin = spec.Stdin
	}
	if spec.Stdout != nil {
		cmd.Stdout = spec.Stdout
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
	if h.start != nil {
		err = h.start(cmd.Start)
	} else {
		err = cmd.Start()
	}
	outW.Close() // the child has its own copies now
	errW.Close()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: start %s: %w", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	kill := func() {
		killGroup(pid)
		if h.kill != nil {
			h.kill()
		}
	}
	if h.started != nil {
		if err := h.started(pid); err != nil {
			kill()
			_ = cmd.Wait()
			return Result{}, err
		}
	}

	stdout := &capture{limit: limit}
	stderr := &capture{limit: limit}
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
		return Result{}, fmt.Errorf("sandbox: wait: %w", err)
	}

	done := make(chan struct{})
	go func() { drained.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainGrace):
		outR.Close() // unblocks the copies; the late output is lost
		errR.Close()
		<-done
	}

	res := Result{
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

// killGroup sends SIGKILL to the process group led by pid. ESRCH (nothing
// left) is the normal case after a clean exit.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
