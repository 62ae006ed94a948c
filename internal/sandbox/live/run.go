package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/live/server"
	"github.com/apodex/apodex/internal/sandbox/native"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// run runs c in the live sandbox, which the pool holds for it (hold). ran
// is false when the command was never
// started (the server is gone or could not take it): the caller runs it
// per command then.
func (lv *live) run(ctx context.Context, c *command.Command) (res spec.Result, err error, ran bool) {
	id := lv.seq.Add(1)
	ch := make(chan server.Wire, 2)
	defer lv.end(id) // the pool's hold
	if !lv.begin(id, ch) {
		return spec.Result{}, nil, false
	}
	if err := c.Ready(); err != nil {
		return spec.Result{}, err, true
	}
	plan := native.PlanOf(c, false)
	plan.Mounts = slices.Clone(c.Mounts)
	for i := range plan.Mounts {
		plan.Mounts[i].Source = reach(c, i)
	}
	sp := server.CommandPlan{Spec: plan, UID: c.UID, GID: c.GID, Drop: c.Drop && lv.pool.backend == spec.KindNative,
		Rlimits: limits.Rlimits(lv.cg, c.Limits, c.Drop), Landlock: lv.pool.backend == spec.KindNative, Prewarm: !slices.ContainsFunc(c.Mounts, func(m spec.Mount) bool { return m.Fresh })}
	raw, err := json.Marshal(sp)
	if err != nil {
		return spec.Result{}, err, true
	}
	limit := c.Spec.OutputLimit
	if limit <= 0 {
		limit = command.DefaultOutputLimit
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
	}
	defer errR.Close()
	// pid 1 writes the exit status here once nothing of the command runs
	// (package live/server); without it (killed, or never started) the
	// server's exit message says how the command ended.
	statusR, statusW, err := os.Pipe()
	if err != nil {
		outW.Close()
		errW.Close()
		return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
	}
	defer statusR.Close()
	msg := server.Wire{Op: "run", ID: id, Plan: raw}
	var fds []int
	var planW *os.File
	if len(raw) > server.MaxInlinePlan {
		planR, w, err := os.Pipe()
		if err != nil {
			outW.Close()
			errW.Close()
			statusW.Close()
			return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
		}
		defer planR.Close()
		msg.Plan, planW, fds = nil, w, []int{int(planR.Fd())}
	}
	fds = append(fds, int(outW.Fd()), int(errW.Fd()), int(statusW.Fd()))
	if c.Ups != nil {
		fds = append(fds, int(c.Ups.Theirs().Fd()))
	}
	before := lv.events.Last()
	begin := time.Now()
	serr := lv.send(msg, fds)
	outW.Close()
	errW.Close()
	statusW.Close()
	if planW != nil {
		if serr == nil {
			go func() {
				_, _ = planW.Write(raw)
				planW.Close()
			}()
		} else {
			planW.Close()
		}
	}
	if serr != nil {
		return spec.Result{}, nil, false
	}
	stdout := command.NewCapture(limit)
	stderr := command.NewCapture(limit)
	var drained sync.WaitGroup
	drained.Go(func() { _, _ = io.Copy(stdout, outR) })
	drained.Go(func() { _, _ = io.Copy(stderr, errR) })

	if c.Spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Spec.Timeout)
		defer cancel()
	}
	memRoot := 0 // where no cgroup bounds memory, the live sandbox's tree is measured, as its cgroup would count it
	if !lv.cg.BoundsMemory() && lv.proc != nil {
		memRoot = lv.proc.Pid
	}
	c.Running(memRoot, func() { _ = lv.send(server.Wire{Op: "kill", ID: id}, nil) })
	stopWatch := make(chan struct{})
	go c.WatchQuotas(stopWatch)
	// A cancelled or timed-out command is killed through the server; its
	// pid 1 then writes no status.
	var cancelled atomic.Bool
	stopKill := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		_ = lv.send(server.Wire{Op: "kill", ID: id}, nil)
	})
	started, dead := false, false
	var exit server.Wire
	var told [2]byte // the exit status, and 1 if pid 1 was warm
	if n, _ := io.ReadFull(statusR, told[:]); n == 2 {
		started = true
		exit = server.Wire{Op: "exit", ID: id, Status: uint32(told[0]) << 8}
		if told[1] == 1 {
			lv.warmStarts.Add(1)
		}
	} else { // the server's exit message says how it ended
	wait:
		for {
			m, ok := <-ch
			switch {
			case !ok:
				dead = true
				break wait
			case m.Op == "started":
				started = true
				if m.Warm {
					lv.warmStarts.Add(1)
				}
			case m.Op == "exit":
				exit = m
				break wait
			}
		}
	}
	stopKill()
	killed := cancelled.Load()
	close(stopWatch)
	if (dead || exit.Err != "") && !started && !killed {
		outR.Close() // unblocks the copies
		errR.Close()
		drained.Wait()
		return spec.Result{}, nil, false
	}

	finished := make(chan struct{})
	go func() { drained.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(command.DrainGrace):
		outR.Close()
		errR.Close()
		<-finished
	}
	res = spec.Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), StdoutBytes: stdout.Total(), StderrBytes: stderr.Total(), Duration: time.Since(begin)}
	ws := syscall.WaitStatus(exit.Status)
	switch {
	case dead && lv.events.HitSince(before) == spec.LimitMemory:
		// The memory limit is the whole live sandbox's (its cgroup): the
		// kernel may kill its server for what the command took (a tmpfs
		// file, say). The command was killed for its memory, as a
		// sandbox per command would report it.
		res.ExitCode = 128 + int(syscall.SIGKILL)
	case dead:
		res.ExitCode = -1
		err = fmt.Errorf("sandbox: the live sandbox ended while command %s ran; run it again", idStr(id))
	case killed && (exit.Err != "" || ws.Signaled() && ws.Signal() == syscall.SIGKILL):
		res.ExitCode = -1
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.TimedOut = true
		} else {
			err = fmt.Errorf("sandbox: command stopped: %w", ctx.Err())
		}
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
	default:
		res.ExitCode = ws.ExitStatus()
	}
	res, err = c.Finish(res, err, func() string { return lv.events.HitSince(before) })
	res.Mechanism = limits.Mechanism(lv.cg, c.Limits)
	return res, err, true
}
