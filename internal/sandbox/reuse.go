package sandbox

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Live sandboxes: Reuse wraps Bwrap or Native in a Pool, which keeps one
// long-lived sandbox per shape of command (backend, network, memory and
// process limits, and the mounts' sources, targets and writability, except
// for a Fresh mount, whose parent counts) and runs each command in it in a
// fresh process (server_linux.go, livecmd_linux.go), which costs a fraction of
// building a sandbox per command.
//
// What a command of a live sandbox gets, as with the per-command runners:
// its own mount, pid and ipc namespaces (its /tmp, /dev/shm, /proc, SysV
// objects and mounts are its own, so a per-command mount such as the
// publishing holder's staging copy of /outputs or a sized overlay works as
// before; its background processes die when it ends), a fresh process as the sandbox uid with no
// capabilities, no_new_privs, the seccomp filter and (native) Landlock, the
// output caps, timeout and cancellation, the runtime's setuid sweep,
// ownership hand-over and quotas.
//
// What the commands of one live sandbox share: its user, network (abstract
// unix sockets included; with Spec.Network or Outbound, the one network
// namespace) and uts namespaces, and its cgroup: Limits.Memory and
// Limits.Pids bound the commands of one shape running at the same time
// together (the server counts too). A command is told it ran into one when
// the group's event counters grew while it ran; with commands at the same
// time, each of them is.
//
// If a live sandbox cannot start, or has died, a command runs through the
// per-command runner instead (never without a sandbox); a command the live
// sandbox had started when it died ends with an error. A live sandbox idle
// for Pool.Idle is shut down; Close shuts all down. If the runtime dies,
// every live sandbox dies with it (parent-death signals; each server is pid
// 1 of its sandbox or bubblewrap's only child).

// ReuseEnv, set to "0", makes Reuse return the per-command runner.
const ReuseEnv = "APODEX_SANDBOX_REUSE"

// Defaults of a Pool.
const (
	DefaultIdle = 5 * time.Minute
	maxLive     = 8               // live sandboxes per pool; the least recently used idle one goes
	brokenFor   = 5 * time.Minute // how long a shape whose sandbox would not start runs per command
)

// ReuseOff reports whether ReuseEnv turns live sandboxes off.
func ReuseOff() bool { return os.Getenv(ReuseEnv) == "0" }

// Reuse returns r with live sandboxes when r is Bwrap or Native (also
// under WithOptions), unless ReuseEnv says "0"; other runners as they are.
func Reuse(r Runner) Runner {
	if ReuseOff() {
		return r
	}
	switch b := r.(type) {
	case limited:
		return limited{Reuse(b.Runner), b.o}
	case *Bwrap:
		return &Pool{backend: KindBwrap, bwrap: b.Path, Idle: DefaultIdle}
	case Native:
		return &Pool{backend: KindNative, Idle: DefaultIdle}
	}
	return r
}

// Close shuts down the live sandboxes of r, a runner Reuse returned; other
// runners have nothing to close.
func Close(r Runner) error {
	if p, ok := Unwrap(r).(*Pool); ok {
		return p.Close()
	}
	return nil
}

// Pool runs commands in live sandboxes, one per shape; see Reuse.
type Pool struct {
	backend string // KindBwrap or KindNative
	bwrap   string
	// Idle is how long an unused live sandbox stays up.
	Idle time.Duration

	mu      sync.Mutex
	lives   map[string]*live
	broken  map[string]time.Time
	lastErr error
	closed  bool
	used    atomic.Int64 // commands run in a live sandbox
}

var _ Runner = (*Pool)(nil)

// perCommand is the runner a command falls back to.
func (p *Pool) perCommand() Runner {
	if p.backend == KindBwrap {
		return &Bwrap{Path: p.bwrap}
	}
	return Native{}
}

// Run runs spec in the live sandbox of its shape, or per command when that
// cannot start or has died.
func (p *Pool) Run(ctx context.Context, spec Spec) (Result, error) {
	if spec.Stdin != nil || spec.Stdout != nil {
		return p.perCommand().Run(ctx, spec) // a server's pipes are its own
	}
	c, err := newCommand(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return Result{ExitCode: -1}, err
		}
		return Result{}, err
	}
	sh := shapeOf(p.backend, c)
	if lv := p.get(sh); lv != nil {
		if res, err, ran := lv.run(ctx, c); ran {
			p.used.Add(1)
			return res, err
		}
		if c.ups != nil {
			c.ups.take()
		}
	}
	return p.perCommand().Run(ctx, spec)
}

// StartError is why the last live sandbox could not start (nil: none
// failed).
func (p *Pool) StartError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// get returns the live sandbox of sh, starting it, or nil when there is none
// to be had.
func (p *Pool) get(sh shape) *live {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if lv := p.lives[sh.key]; lv != nil {
		if lv.hold() {
			return lv
		}
		delete(p.lives, sh.key)
	}
	if t, ok := p.broken[sh.key]; ok && time.Since(t) < brokenFor {
		return nil
	}
	lv, err := startLiveFn(p, sh)
	if err != nil {
		if p.broken == nil {
			p.broken = map[string]time.Time{}
		}
		p.broken[sh.key], p.lastErr = time.Now(), err
		return nil
	}
	if p.lives == nil {
		p.lives = map[string]*live{}
	}
	for len(p.lives) >= maxLive && p.evictLocked() {
	}
	p.lives[sh.key] = lv
	lv.hold()
	return lv
}

// evictLocked shuts down the least recently used idle live sandbox.
func (p *Pool) evictLocked() bool {
	var old *live
	for _, lv := range p.lives {
		if lv.idleSince().IsZero() {
			continue
		}
		if old == nil || lv.idleSince().Before(old.idleSince()) {
			old = lv
		}
	}
	if old == nil {
		return false
	}
	delete(p.lives, old.sh.key)
	go old.close()
	return true
}

// retire shuts lv down if it is still idle.
func (p *Pool) retire(lv *live) {
	p.mu.Lock()
	if p.lives[lv.sh.key] != lv || lv.idleSince().IsZero() {
		p.mu.Unlock()
		return
	}
	delete(p.lives, lv.sh.key)
	p.mu.Unlock()
	lv.close()
}

// Close shuts down every live sandbox (killing the commands in them); the
// Pool then runs commands per command.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	lives := p.lives
	p.lives = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, lv := range lives {
		wg.Go(lv.close)
	}
	wg.Wait()
	return nil
}

// shape is what a live sandbox is made for.
type shape struct {
	key               string
	network, outbound bool
	allow             []netip.Prefix // with outbound
	memory, pids      int64
	hidden            []hiddenMount
	targets           []string
}

// shapeOf is c's shape; mount i of c is at hiddenPath(i) in it (a Fresh
// one in its parent there).
func shapeOf(backend string, c *command) shape {
	sh := shape{network: c.spec.Network, outbound: c.outbound, memory: c.lim.Memory, pids: c.lim.Pids}
	if c.outbound {
		sh.allow = c.spec.AllowNets
	}
	for _, m := range c.mounts {
		src := m.Source
		if m.Fresh {
			src = filepath.Dir(src)
		}
		sh.hidden = append(sh.hidden, hiddenMount{Source: src, Writable: m.Writable, Parent: m.Fresh})
		sh.targets = append(sh.targets, m.Target)
	}
	raw, _ := json.Marshal([]any{backend, sh.network, sh.outbound, sh.allow, sh.memory, sh.pids, sh.hidden, sh.targets,
		slices.Collect(func(yield func(bool) bool) {
			for _, m := range c.mounts {
				if !yield(m.Fresh) {
					return
				}
			}
		})})
	sh.key = string(raw)
	return sh
}

// reach is where the server finds mount i of c.
func reach(c *command, i int) string {
	if m := c.mounts[i]; m.Fresh {
		return hiddenPath(i) + "/" + filepath.Base(m.Source)
	}
	return hiddenPath(i)
}
