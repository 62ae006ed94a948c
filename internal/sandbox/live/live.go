package live

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/bwrap"
	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/etccopy"
	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/live/server"
	"github.com/apodex/apodex/internal/sandbox/native"
	"github.com/apodex/apodex/internal/sandbox/netns"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// startTimeout bounds how long a live sandbox's server may take to be ready.
const startTimeout = 10 * time.Second

// live is the runtime's end of one live sandbox.
type live struct {
	pool   *Pool
	sh     shape
	conn   *os.File
	proc   *os.Process
	exited chan struct{} // closed once proc is reaped
	cg     *limits.Cgroup
	events *limits.Counters
	etc    *etccopy.Copy
	net    *netns.Outbound  // with an outbound network
	stderr *command.Capture // the server's own complaints
	seq    atomic.Uint64
	// warmStarts counts the commands started on a warm pid 1
	// (package live/server).
	warmStarts atomic.Uint64

	wmu    sync.Mutex // one message at a time on conn
	mu     sync.Mutex
	waits  map[uint64]chan server.Wire
	dead   bool
	busy   int
	since  time.Time // idle since (zero while busy)
	timer  *time.Timer
	closed sync.Once
}

// startLive starts the live sandbox of sh and waits until it is ready.
func startLive(p *Pool, sh shape) (*live, error) {
	exe, err := spec.SelfExe()
	if err != nil {
		return nil, err
	}
	etc, err := etccopy.Host.Acquire()
	if err != nil {
		return nil, err
	}
	uid, gid, drop := spec.IDs()
	lv := &live{pool: p, sh: sh, etc: etc, waits: map[uint64]chan server.Wire{}, exited: make(chan struct{}),
		stderr: command.NewCapture(4 << 10)}
	lv.cg = limits.NewCgroup(spec.Limits{Memory: sh.memory, Pids: sh.pids})
	lv.events = limits.NewCounters(lv.cg)
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
		if msg := strings.TrimSpace(string(lv.stderr.Bytes())); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("sandbox: start a live %s sandbox: %w", p.backend, err)
	}
	if drop && p.backend == spec.KindBwrap {
		if err := traversable(sh, uid); err != nil {
			return fail(err)
		}
	}
	sp := server.Plan{Backend: p.backend, Bwrap: p.bwrap, UID: uid, GID: gid, Drop: drop, Etc: etc.Dir(),
		Network: sh.network || sh.outbound, Hidden: sh.hidden, Targets: sh.targets}
	if sh.outbound {
		if lv.net, err = netns.NewOutbound(drop, netns.OutboundRules(etc.Dir(), sh.allow)); err != nil {
			return fail(err)
		}
		sp.Net = lv.net.Rules()
	}
	if sp.Bwrap == "" && p.backend == spec.KindBwrap {
		if sp.Bwrap, err = bwrap.Look(); err != nil {
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
	attr := native.HelperAttr(p.backend, sh.network, sh.outbound, lv.net.Joined(), drop, uid, gid, lv.cg)
	var proc *os.Process
	err = lv.net.Start(func() (err error) {
		proc, err = os.StartProcess(exe, []string{"apodex-sandbox-serve"}, &os.ProcAttr{
			Env:   []string{server.Env + "=" + string(raw)},
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
	if err := lv.cg.Join(proc.Pid); err != nil {
		return fail(err)
	}
	if err := lv.net.Started(proc.Pid); err != nil {
		return fail(err)
	}
	if err := lv.send(server.Wire{Op: "start"}, nil); err != nil {
		return fail(err)
	}
	ready := make(chan error, 1)
	go func() { ready <- lv.awaitReady() }()
	select {
	case err := <-ready:
		if err != nil {
			return fail(err)
		}
	case <-time.After(startTimeout):
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

func (lv *live) recv() (server.Wire, error) {
	buf := make([]byte, 4096)
	for {
		n, _, _, _, err := syscall.Recvmsg(int(lv.conn.Fd()), buf, nil, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return server.Wire{}, err
		}
		if n == 0 {
			return server.Wire{}, errors.New("end of file")
		}
		var m server.Wire
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			return server.Wire{}, err
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

func (lv *live) send(m server.Wire, fds []int) error {
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
		lv.net.Close()
		lv.events.Close()
		lv.cg.Remove()
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
func (lv *live) begin(id uint64, ch chan server.Wire) bool {
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
