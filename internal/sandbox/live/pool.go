// Package live runs commands in live sandboxes. A Pool (sandbox.Reuse wraps
// Bwrap or Native in one) keeps one
// long-lived sandbox per shape of command (backend, network, memory and
// process limits, and the mounts' sources, targets and writability, except
// for a Fresh mount, whose parent counts) and runs each command in it in a
// fresh process (package live/server), which costs a fraction of
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
package live

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

	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/live/server"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// ReuseEnv is the variable that, set to "0", makes Reuse return the per-command runner.
const ReuseEnv = "APODEX_SANDBOX_REUSE"

// Defaults of a Pool.
const (
	DefaultIdle = 5 * time.Minute
	maxLive     = 8               // live sandboxes per pool; the least recently used idle one goes
	brokenFor   = 5 * time.Minute // how long a shape whose sandbox would not start runs per command
)

// ReuseOff reports whether ReuseEnv turns live sandboxes off.
func ReuseOff() bool { return os.Getenv(ReuseEnv) == "0" }

// NewPool returns a Pool of live sandboxes of backend (spec.KindBwrap,
// with bubblewrap at bwrapPath, "" to look it up, or spec.KindNative);
// perCommand is the runner of that backend its commands fall back to.
func NewPool(backend, bwrapPath string, perCommand spec.Runner) *Pool {
	p := &Pool{backend: backend, bwrap: bwrapPath, perCommand: perCommand, Idle: DefaultIdle}
	p.start = startLive
	return p
}

// Pool runs commands in live sandboxes, one per shape; see NewPool.
type Pool struct {
	backend    string // spec.KindBwrap or spec.KindNative
	bwrap      string
	perCommand spec.Runner // what a command falls back to
	start      func(*Pool, shape) (*live, error)
	// Idle is how long an unused live sandbox stays up.
	Idle time.Duration

	mu      sync.Mutex
	lives   map[string]*live
	broken  map[string]time.Time
	lastErr error
	closed  bool
	used    atomic.Int64 // commands run in a live sandbox
}

var _ spec.Runner = (*Pool)(nil)

// Backend is the backend of the pool's sandboxes (spec.KindBwrap or
// spec.KindNative).
func (p *Pool) Backend() string { return p.backend }

// Run runs spec in the live sandbox of its shape, or per command when that
// cannot start or has died.
func (p *Pool) Run(ctx context.Context, sp spec.Spec) (spec.Result, error) {
	if sp.Stdin != nil || sp.Stdout != nil {
		return p.perCommand.Run(ctx, sp) // a server's pipes are its own
	}
	c, err := command.New(ctx, sp)
	if err != nil {
		if ctx.Err() != nil {
			return spec.Result{ExitCode: -1}, err
		}
		return spec.Result{}, err
	}
	sh := shapeOf(p.backend, c)
	if lv := p.get(sh); lv != nil {
		if res, err, ran := lv.run(ctx, c); ran {
			p.used.Add(1)
			return res, err
		}
		if c.Ups != nil {
			c.Ups.Take()
		}
	}
	return p.perCommand.Run(ctx, sp)
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
	lv, err := p.start(p, sh)
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
	hidden            []server.Hidden
	targets           []string
}

// shapeOf is c's shape; mount i of c is at server.HiddenPath(i) in it (a Fresh
// one in its parent there).
func shapeOf(backend string, c *command.Command) shape {
	sh := shape{network: c.Spec.Network, outbound: c.Outbound, memory: c.Limits.Memory, pids: c.Limits.Pids}
	if c.Outbound {
		sh.allow = c.Spec.AllowNets
	}
	for _, m := range c.Mounts {
		src := m.Source
		if m.Fresh {
			src = filepath.Dir(src)
		}
		sh.hidden = append(sh.hidden, server.Hidden{Source: src, Writable: m.Writable, Parent: m.Fresh})
		sh.targets = append(sh.targets, m.Target)
	}
	raw, _ := json.Marshal([]any{backend, sh.network, sh.outbound, sh.allow, sh.memory, sh.pids, sh.hidden, sh.targets,
		slices.Collect(func(yield func(bool) bool) {
			for _, m := range c.Mounts {
				if !yield(m.Fresh) {
					return
				}
			}
		})})
	sh.key = string(raw)
	return sh
}

// reach is where the server finds mount i of c.
func reach(c *command.Command, i int) string {
	if m := c.Mounts[i]; m.Fresh {
		return server.HiddenPath(i) + "/" + filepath.Base(m.Source)
	}
	return server.HiddenPath(i)
}
