package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/sandbox/etccopy"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// live is the runtime's end of one live sandbox.
type live struct {
	pool   *Pool
	sh     shape
	conn   *os.File
	proc   *os.Process
	exited chan struct{} // closed once proc is reaped
	cg     *cgroup
	events *cgCounters
	etc    *etccopy.Copy
	net    *outboundNet // with an outbound network
	stderr *capture     // the server's own complaints
	seq    atomic.Uint64
	// warmStarts counts the commands started on a warm pid 1
	// (livewarm_linux.go).
	warmStarts atomic.Uint64

	wmu    sync.Mutex // one message at a time on conn
	mu     sync.Mutex
	waits  map[uint64]chan wire
	dead   bool
	busy   int
	since  time.Time // idle since (zero while busy)
	timer  *time.Timer
	closed sync.Once
}

// startLiveFn is startLive; tests replace it.
var startLiveFn = startLive

// startLive starts the live sandbox of sh and waits until it is ready.
func startLive(p *Pool, sh shape) (*live, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	etc, err := etccopy.Host.Acquire()
	if err != nil {
		return nil, err
	}
	uid, gid, drop := ids()
	lv := &live{pool: p, sh: sh, etc: etc, waits: map[uint64]chan wire{}, exited: make(chan struct{}),
		stderr: &capture{limit: 4 << 10}}
	lv.cg = newCgroup(Limits{Memory: sh.memory, Pids: sh.pids})
	lv.events = newCounters(lv.cg)
	stderrDone := make(chan struct{})
	fail := func(err error) (*live, error) {
		lv.close()
		if lv.proc != nil {
			select {
			case <-stderrDone:
			case <-time.After(time.Second):
			}
		}
		lv.mu.Lock()
		defer lv.mu.Unlock()
		if msg := strings.TrimSpace(string(lv.stderr.buf)); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("sandbox: start a live %s sandbox: %w", p.backend, err)
	}
	if drop && p.backend == KindBwrap {
		if err := traversable(sh, uid); err != nil {
			return fail(err)
		}
	}
	sp := serverPlan{Backend: p.backend, Bwrap: p.bwrap, UID: uid, GID: gid, Drop: drop, Etc: etc.Dir(),
		Network: sh.network || sh.outbound, Hidden: sh.hidden, Targets: sh.targets}
	if sh.outbound {
		if lv.net, err = newOutbound(drop, outboundRules(etc.Dir(), sh.allow)); err != nil {
			return fail(err)
		}
		sp.Net = lv.net.rules
	}
	if sp.Bwrap == "" && p.backend == KindBwrap {
		if sp.Bwrap, err = lookBwrap(); err != nil {
			return fail(err)
		}
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return fail(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	lv.conn = os.NewFile(uintptr(fds[0]), "live")
	theirs := os.NewFile(uintptr(fds[1]), "live-server")
	errR, errW, err := os.Pipe()
	if err != nil {
		theirs.Close()
		return fail(err)
	}
	attr := helperAttr(p.backend, sh.network, sh.outbound, lv.net.joined(), drop, uid, gid, lv.cg)
	var proc *os.Process
	err = lv.net.start(func() (err error) {
		proc, err = os.StartProcess(exe, []string{"apodex-sandbox-serve"}, &os.ProcAttr{
			Env:   []string{serverEnv + "=" + string(raw)},
			Files: []*os.File{nil, errW, errW, theirs},
			Sys:   attr,
		})
		return err
	})
	theirs.Close()
	errW.Close()
	if err != nil {
		errR.Close()
		return fail(err)
	}
	lv.proc = proc
	go func() {
		_, _ = proc.Wait()
		close(lv.exited)
	}()
	go func() {
		defer close(stderrDone)
		buf := make([]byte, 512)
		for {
			n, err := errR.Read(buf)
			lv.mu.Lock()
			_, _ = lv.stderr.Write(buf[:n])
			lv.mu.Unlock()
			if err != nil {
				errR.Close()
				return
			}
		}
	}()
	if err := lv.cg.join(proc.Pid); err != nil {
		return fail(err)
	}
	if err := lv.net.started(proc.Pid); err != nil {
		return fail(err)
	}
	if err := lv.send(wire{Op: "start"}, nil); err != nil {
		return fail(err)
	}
	ready := make(chan error, 1)
	go func() { ready <- lv.awaitReady() }()
	select {
	case err := <-ready:
		if err != nil {
			return fail(err)
		}
	case <-time.After(probeTimeout):
		return fail(errors.New("the server was not ready in time"))
	}
	go lv.read()
	return lv, nil
}

// traversable checks that the sandbox uid can reach a Fresh mount's
// source inside its parent (bubblewrap binds it as that uid): the parent
// gets o+x, which gives no one else anything while the directories above it
// (the run directory, 0700) stay closed.
func traversable(sh shape, uid int) error {
	for _, h := range sh.hidden {
		if !h.Parent {
			continue
		}
		fi, err := os.Stat(h.Source)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) == uid || fi.Mode().Perm()&0o001 != 0 {
			continue
		}
		if err := os.Chmod(h.Source, fi.Mode().Perm()|0o001); err != nil {
			return err
		}
	}
	return nil
}

// awaitReady reads the server's ready message.
func (lv *live) awaitReady() error {
	m, err := lv.recv()
	if err != nil {
		return fmt.Errorf("the server ended before it was ready: %w", err)
	}
	if m.Op != "ready" {
		return fmt.Errorf("the server said %q before ready", m.Op)
	}
	return nil
}

func (lv *live) recv() (wire, error) {
	buf := make([]byte, 4096)
	for {
		n, _, _, _, err := syscall.Recvmsg(int(lv.conn.Fd()), buf, nil, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return wire{}, err
		}
		if n == 0 {
			return wire{}, errors.New("end of file")
		}
		var m wire
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			return wire{}, err
		}
		return m, nil
	}
}

// read delivers the server's messages to the commands waiting for them
// until the server is gone.
func (lv *live) read() {
	for {
		m, err := lv.recv()
		if err != nil {
			break
		}
		lv.mu.Lock()
		ch := lv.waits[m.ID]
		lv.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	lv.mu.Lock()
	lv.dead = true
	for id, ch := range lv.waits {
		close(ch)
		delete(lv.waits, id)
	}
	lv.mu.Unlock()
}

func (lv *live) send(m wire, fds []int) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	lv.wmu.Lock()
	defer lv.wmu.Unlock()
	return syscall.Sendmsg(int(lv.conn.Fd()), raw, oob, nil, 0)
}

// gone reports whether the server has died.
func (lv *live) gone() bool {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	return lv.dead
}

func (lv *live) idleSince() time.Time {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	return lv.since
}

// close shuts the live sandbox down: the server sees the end of its socket
// and exits, taking every command with it; what is left is killed.
func (lv *live) close() {
	lv.closed.Do(func() {
		if lv.conn != nil {
			lv.wmu.Lock()
			_ = syscall.Shutdown(int(lv.conn.Fd()), syscall.SHUT_RDWR)
			lv.wmu.Unlock()
		}
		if lv.proc != nil {
			select {
			case <-lv.exited:
			case <-time.After(2 * time.Second):
				_ = lv.proc.Kill()
				<-lv.exited
			}
		}
		lv.net.close()
		lv.events.close()
		lv.cg.remove()
		etccopy.Host.Release(lv.etc)
		lv.mu.Lock()
		if lv.timer != nil {
			lv.timer.Stop()
		}
		lv.mu.Unlock()
	})
}

// hold counts a command about to run (under the pool's lock, so an idle
// shutdown cannot take the sandbox away under it); it fails when the server
// is gone. end undoes it.
func (lv *live) hold() bool {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.dead {
		return false
	}
	lv.busy++
	lv.since = time.Time{}
	if lv.timer != nil {
		lv.timer.Stop()
	}
	return true
}

// begin registers a command's messages; it fails when the server is gone.
func (lv *live) begin(id uint64, ch chan wire) bool {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.dead {
		return false
	}
	lv.waits[id] = ch
	return true
}

// end unregisters a command; the last one starts the idle clock.
func (lv *live) end(id uint64) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	delete(lv.waits, id)
	lv.busy--
	if lv.busy > 0 {
		return
	}
	lv.since = time.Now()
	if idle := lv.pool.Idle; idle > 0 {
		if lv.timer == nil {
			lv.timer = time.AfterFunc(idle, func() { lv.pool.retire(lv) })
		} else {
			lv.timer.Reset(idle)
		}
	}
}

// idStr names a command in errors.
func idStr(id uint64) string { return strconv.FormatUint(id, 10) }
