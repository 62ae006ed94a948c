package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// run runs c in the live sandbox. ran is false when the command was never
// started (the server is gone or could not take it): the caller runs it
// per command then.
func (lv *live) run(ctx context.Context, c *command) (res Result, err error, ran bool) {
	id := lv.seq.Add(1)
	ch := make(chan wire, 2)
	if !lv.begin(id, ch) {
		return Result{}, nil, false
	}
	defer lv.end(id)
	if err := c.ready(); err != nil {
		return Result{}, err, true
	}
	spec := c.specPlan(false)
	spec.Mounts = slices.Clone(c.mounts)
	for i := range spec.Mounts {
		spec.Mounts[i].Source = reach(c, i)
	}
	sp := shimPlan{Spec: spec, UID: c.uid, GID: c.gid, Drop: c.drop && lv.pool.backend == KindNative,
		Rlimits: c.rlimits(lv.cg), Landlock: lv.pool.backend == KindNative}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Result{}, err, true
	}
	limit := c.spec.OutputLimit
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	var pipes [6]*os.File // plan r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			for _, f := range pipes {
				if f != nil {
					f.Close()
				}
			}
			return Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
		}
	}
	planR, planW, outR, outW, errR, errW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	defer outR.Close()
	defer errR.Close()
	fds := []int{int(planR.Fd()), int(outW.Fd()), int(errW.Fd())}
	if c.ups != nil {
		fds = append(fds, int(c.ups.theirs.Fd()))
	}
	before := lv.cg.events()
	begin := time.Now()
	serr := lv.send(wire{Op: "run", ID: id}, fds)
	planR.Close()
	outW.Close()
	errW.Close()
	if serr != nil {
		planW.Close()
		return Result{}, nil, false
	}
	go func() {
		_, _ = planW.Write(raw)
		planW.Close()
	}()
	stdout := &capture{limit: limit}
	stderr := &capture{limit: limit}
	var drained sync.WaitGroup
	drained.Go(func() { _, _ = io.Copy(stdout, outR) })
	drained.Go(func() { _, _ = io.Copy(stderr, errR) })

	if c.spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.spec.Timeout)
		defer cancel()
	}
	c.running(func() { _ = lv.send(wire{Op: "kill", ID: id}, nil) })
	stopWatch := make(chan struct{})
	go c.watchQuotas(stopWatch)
	killed, started, dead := false, false, false
	var exit wire
	done := ctx.Done()
wait:
	for {
		select {
		case m, ok := <-ch:
			switch {
			case !ok:
				dead = true
				break wait
			case m.Op == "started":
				started = true
			case m.Op == "exit":
				exit = m
				break wait
			}
		case <-done:
			killed, done = true, nil
			_ = lv.send(wire{Op: "kill", ID: id}, nil)
		}
	}
	close(stopWatch)
	if (dead || exit.Err != "") && !started && !killed {
		outR.Close() // unblocks the copies
		errR.Close()
		drained.Wait()
		return Result{}, nil, false
	}

	finished := make(chan struct{})
	go func() { drained.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(drainGrace):
		outR.Close()
		errR.Close()
		<-finished
	}
	res = Result{Stdout: stdout.buf, Stderr: stderr.buf, StdoutBytes: stdout.n, StderrBytes: stderr.n, Duration: time.Since(begin)}
	ws := syscall.WaitStatus(exit.Status)
	switch {
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
	res, err = c.finish(res, err, func() string { return lv.cg.hitSince(before) })
	res.Mechanism = mechanism(lv.cg, c.lim)
	return res, err, true
}

// cgEvents are the counters of a cgroup that grow when a limit is hit.
type cgEvents struct{ memory, pids int64 }

// events reads the group's counters.
func (cg *cgroup) events() cgEvents {
	read := func(dir, file string) string {
		b, _ := os.ReadFile(dir + "/" + file)
		return string(b)
	}
	var e cgEvents
	if d := cg.v1["memory"]; d != "" {
		e.memory += countKey(read(d, "memory.oom_control"), "oom_kill")
		n, _ := strconv.ParseInt(strings.TrimSpace(read(d, "memory.failcnt")), 10, 64)
		e.memory += n
	}
	if cg.memory == "cgroup-v2" {
		ev := read(cg.v2, "memory.events")
		e.memory += countKey(ev, "oom_kill") + countKey(ev, "max")
	}
	if d := cg.v1["pids"]; d != "" {
		e.pids += countKey(read(d, "pids.events"), "max")
	}
	if cg.pids == "cgroup-v2" {
		e.pids += countKey(read(cg.v2, "pids.events"), "max")
	}
	return e
}

// hitSince names the limit whose counters grew since before ("" none).
func (cg *cgroup) hitSince(before cgEvents) string {
	now := cg.events()
	switch {
	case now.memory > before.memory:
		return LimitMemory
	case now.pids > before.pids:
		return LimitPids
	}
	return ""
}

// countKey reads the value of key in a "key value" per line file.
func countKey(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
