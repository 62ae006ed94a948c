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
	"sync/atomic"
	"syscall"
	"time"
)

// run runs c in the live sandbox, which the pool holds for it (hold). ran
// is false when the command was never
// started (the server is gone or could not take it): the caller runs it
// per command then.
func (lv *live) run(ctx context.Context, c *command) (res Result, err error, ran bool) {
	id := lv.seq.Add(1)
	ch := make(chan wire, 2)
	defer lv.end(id) // the pool's hold
	if !lv.begin(id, ch) {
		return Result{}, nil, false
	}
	if err := c.ready(); err != nil {
		return Result{}, err, true
	}
	spec := c.specPlan(false)
	spec.Mounts = slices.Clone(c.mounts)
	for i := range spec.Mounts {
		spec.Mounts[i].Source = reach(c, i)
	}
	sp := livePlan{Spec: spec, UID: c.uid, GID: c.gid, Drop: c.drop && lv.pool.backend == KindNative,
		Rlimits: c.rlimits(lv.cg), Landlock: lv.pool.backend == KindNative, Prewarm: !slices.ContainsFunc(c.mounts, func(m Mount) bool { return m.Fresh })}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Result{}, err, true
	}
	limit := c.spec.OutputLimit
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
	}
	defer errR.Close()
	// pid 1 writes the exit status here once nothing of the command runs
	// (livecmd_linux.go); without it (killed, or never started) the
	// server's exit message says how the command ended.
	statusR, statusW, err := os.Pipe()
	if err != nil {
		outW.Close()
		errW.Close()
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
	}
	defer statusR.Close()
	msg := wire{Op: "run", ID: id, Plan: raw}
	var fds []int
	var planW *os.File
	if len(raw) > maxInlinePlan {
		planR, w, err := os.Pipe()
		if err != nil {
			outW.Close()
			errW.Close()
			statusW.Close()
			return Result{}, fmt.Errorf("sandbox: pipe: %w", err), true
		}
		defer planR.Close()
		msg.Plan, planW, fds = nil, w, []int{int(planR.Fd())}
	}
	fds = append(fds, int(outW.Fd()), int(errW.Fd()), int(statusW.Fd()))
	if c.ups != nil {
		fds = append(fds, int(c.ups.theirs.Fd()))
	}
	before := lv.events.last()
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
		return Result{}, nil, false
	}
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
	// A cancelled or timed-out command is killed through the server; its
	// pid 1 then writes no status.
	var cancelled atomic.Bool
	stopKill := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		_ = lv.send(wire{Op: "kill", ID: id}, nil)
	})
	started, dead := false, false
	var exit wire
	var told [2]byte // the exit status, and 1 if pid 1 was warm
	if n, _ := io.ReadFull(statusR, told[:]); n == 2 {
		started = true
		exit = wire{Op: "exit", ID: id, Status: uint32(told[0]) << 8}
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
	res, err = c.finish(res, err, func() string { return lv.events.hitSince(before) })
	res.Mechanism = mechanism(lv.cg, c.lim)
	return res, err, true
}

// cgEvents are the counters of a cgroup that grow when a limit is hit.
type cgEvents struct{ memory, pids int64 }

// cgCounters reads a live sandbox's cgroup counters through descriptors
// opened once; last is what the latest reading said.
type cgCounters struct {
	files []cgFile
	mu    sync.Mutex
	prev  cgEvents
}

type cgFile struct {
	f      *os.File
	pids   bool   // counts toward pids, else memory
	key    string // the line's key, "" for a file that is one number
	counts []string
}

// newCounters opens the counters of cg.
func newCounters(cg *cgroup) *cgCounters {
	c := &cgCounters{}
	add := func(dir, file string, pids bool, keys ...string) {
		f, err := os.Open(dir + "/" + file)
		if err != nil {
			return
		}
		c.files = append(c.files, cgFile{f: f, pids: pids, counts: keys})
	}
	if d := cg.v1["memory"]; d != "" {
		add(d, "memory.oom_control", false, "oom_kill")
		add(d, "memory.failcnt", false, "")
	}
	if cg.memory == "cgroup-v2" {
		add(cg.v2, "memory.events", false, "oom_kill", "max")
	}
	if d := cg.v1["pids"]; d != "" {
		add(d, "pids.events", true, "max")
	}
	if cg.pids == "cgroup-v2" {
		add(cg.v2, "pids.events", true, "max")
	}
	c.prev = c.read()
	return c
}

func (c *cgCounters) read() cgEvents {
	var e cgEvents
	buf := make([]byte, 1024)
	for _, f := range c.files {
		n, _ := f.f.ReadAt(buf, 0)
		text := string(buf[:n])
		var sum int64
		for _, k := range f.counts {
			if k == "" {
				v, _ := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
				sum += v
			} else {
				sum += countKey(text, k)
			}
		}
		if f.pids {
			e.pids += sum
		} else {
			e.memory += sum
		}
	}
	return e
}

// last is the latest reading.
func (c *cgCounters) last() cgEvents {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prev
}

// hitSince reads the counters and names the limit whose counters grew
// since before ("" none).
func (c *cgCounters) hitSince(before cgEvents) string {
	now := c.read()
	c.mu.Lock()
	c.prev = now
	c.mu.Unlock()
	switch {
	case now.memory > before.memory:
		return LimitMemory
	case now.pids > before.pids:
		return LimitPids
	}
	return ""
}

func (c *cgCounters) close() {
	for _, f := range c.files {
		f.f.Close()
	}
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
