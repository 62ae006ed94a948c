package server

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/apodex/apodex/internal/sandbox/native"
	"github.com/apodex/apodex/internal/sandbox/spec"
	"golang.org/x/sys/unix"
)

// A warm command: while a command runs, the server makes the next one
// ready — its mount namespace built (fresh /tmp and /dev/shm, the mounts,
// a sized overlay's empty upper layer, the hidden directory detached) and
// its pid 1 forked, with its own /proc, no capabilities, its limits,
// no_new_privs, Landlock and the seccomp filter — and parks pid 1 on a
// socket. The next command whose plan is the same but for its command
// line, environment and directory takes it: the server fills those in
// (pid 1 shares its memory, fork_linux_amd64.go), passes the upper
// layers to the runner and sends pid 1 the command's stdout and stderr;
// pid 1 forks the shell. A command that differs (another mount, a new
// quota, a Fresh mount) discards it and is built as before. Nothing of a
// warm command is seen by another: it is a new namespace that no command
// has touched, made for exactly one.

// warmCtlFD is a warm pid 1's socket to the server.
const warmCtlFD = 4

// warmMsg is where a warm pid 1 receives its command's stdout and stderr.
type warmMsg struct {
	hdr syscall.Msghdr
	iov syscall.Iovec
	buf [8]byte
	oob [64]byte
}

func newWarmMsg() *warmMsg {
	w := &warmMsg{}
	w.iov.Base = &w.buf[0]
	w.iov.SetLen(len(w.buf))
	w.hdr.Iov = &w.iov
	w.hdr.Iovlen = 1
	w.hdr.Control = &w.oob[0]
	w.hdr.SetControllen(len(w.oob))
	return w
}

// awaitCommand is a warm pid 1 saying it is ready and waiting for its
// command: its stdout and stderr come as rights, then every descriptor but
// stdio is closed. Any failure ends pid 1 (the server then builds the
// command anew).
//
//go:nosplit
//go:norace
func awaitCommand(w *warmMsg) {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_WRITE, warmCtlFD, uintptr(unsafe.Pointer(&w.buf[0])), 1, 0, 0, 0); e != 0 {
		rawExit(spec.HelperExit)
	}
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVMSG, warmCtlFD, uintptr(unsafe.Pointer(&w.hdr)), syscall.MSG_CMSG_CLOEXEC, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || n == 0 {
			rawExit(spec.HelperExit)
		}
		break
	}
	// One SCM_RIGHTS message of three descriptors (stdout, stderr, the
	// status pipe): a 16-byte header, then the descriptors. They arrive
	// above statusFD (3, the Landlock ruleset's, may be free again).
	level := *(*int32)(unsafe.Pointer(&w.oob[8]))
	typ := *(*int32)(unsafe.Pointer(&w.oob[12]))
	if w.hdr.Controllen < 28 || level != syscall.SOL_SOCKET || typ != syscall.SCM_RIGHTS {
		rawExit(spec.HelperExit)
	}
	var got [3]uintptr
	for i := range got {
		fd := uintptr(*(*int32)(unsafe.Pointer(&w.oob[16+4*i])))
		got[i], _, _ = syscall.RawSyscall6(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 16, 0, 0, 0)
	}
	syscall.RawSyscall6(syscall.SYS_DUP3, got[0], 1, 0, 0, 0, 0)
	syscall.RawSyscall6(syscall.SYS_DUP3, got[1], 2, 0, 0, 0, 0)
	syscall.RawSyscall6(syscall.SYS_DUP3, got[2], statusFD, syscall.O_CLOEXEC, 0, 0, 0)
	syscall.RawSyscall6(sysCloseRange, 3, statusFD-1, 0, 0, 0, 0)
	syscall.RawSyscall6(sysCloseRange, statusFD+1, ^uintptr(0), 0, 0, 0, 0)
}

// warm is a command made ready.
type warm struct {
	key    string
	pid    int
	r      *rawCmd
	ctl    int      // the server's end of pid 1's socket
	uppers [][2]int // mount index, upper layer descriptor
	sized  []int64  // the upper layers' sizes, by mount index
}

// warmKey is what a plan must share with a warm command to take it:
// everything but the command line, environment and directory and the sizes
// of the upper layers (which mounts have one counts; start resizes them),
// and whether it has a socket for upper layers.
func warmKey(p CommandPlan, ups bool) string {
	p.Spec.Command, p.Spec.Env, p.Spec.Dir = "", nil, ""
	p.Spec.Sized = slices.Clone(p.Spec.Sized)
	for i, n := range p.Spec.Sized {
		p.Spec.Sized[i] = min(n, 1)
	}
	raw, _ := json.Marshal(struct {
		P   CommandPlan
		Ups bool
	}{p, ups})
	return string(raw)
}

// makeWarm builds a warm command for plans like p on the calling thread
// (locked, and spoilt as startCommand's is).
func makeWarm(p CommandPlan, ups bool, devnull int, ov *native.Overlays) (*warm, error) {
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return nil, err
	}
	w := &warm{key: warmKey(p, ups), ctl: -1, sized: p.Spec.Sized}
	var pass func(i, fd int) error
	if ups {
		pass = func(i, fd int) error {
			w.uppers = append(w.uppers, [2]int{i, fd})
			return nil
		}
	}
	r := &rawCmd{landlock: -1, stdin: devnull, stdout: -1, stderr: -1, status: -1, drop: p.Drop, uid: p.UID, gid: p.GID, warm: newWarmMsg()}
	w.r = r
	if msg := buildNamespace(p.Spec, pass, ov); msg != "" {
		w.discard()
		return nil, fmt.Errorf("%s", msg)
	}
	if err := r.prepare(p); err != nil {
		if r.landlock >= 0 {
			syscall.Close(r.landlock)
		}
		w.discard()
		return nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		w.discard()
		return nil, err
	}
	w.ctl, r.ctl = pair[0], pair[1]
	pid, err := r.fork()
	syscall.Close(pair[1])
	if r.landlock >= 0 {
		syscall.Close(r.landlock)
	}
	if err != nil {
		w.discard()
		return nil, err
	}
	w.pid = pid
	var ready [1]byte
	if n, err := syscall.Read(w.ctl, ready[:]); n != 1 || err != nil {
		w.discard() // pid 1 failed its setup
		return nil, fmt.Errorf("warm pid 1 did not get ready")
	}
	return w, nil
}

// start gives w the command of p: its upper layers go to the runner
// through ups (-1 none), stdout, stderr and the status pipe to pid 1. w's
// descriptors are closed; on an error the caller discards w.
func (w *warm) start(p CommandPlan, stdout, stderr, status, ups int) error {
	for len(w.uppers) > 0 {
		u := w.uppers[0]
		var err error
		if size := p.Spec.Sized[u[0]]; size != w.sized[u[0]] {
			err = resizeTmpfs(u[1], size) // what the quota has left now
		}
		if err == nil {
			err = passUpper(ups, u[0], u[1])
		}
		syscall.Close(u[1])
		w.uppers = w.uppers[1:]
		if err != nil {
			return err
		}
	}
	if err := w.r.command(p.Spec); err != nil {
		return err
	}
	err := syscall.Sendmsg(w.ctl, []byte{'g'}, syscall.UnixRights(stdout, stderr, status), nil, 0)
	syscall.Close(w.ctl)
	w.ctl = -1
	return err
}

// resizeTmpfs makes the tmpfs whose root is fd size bytes large.
func resizeTmpfs(fd int, size int64) error {
	fs, err := unix.Fspick(fd, "", unix.FSPICK_EMPTY_PATH|unix.FSPICK_CLOEXEC)
	if err != nil {
		return err
	}
	defer syscall.Close(fs)
	if err := unix.FsconfigSetString(fs, "size", strconv.FormatInt(max(size, 1), 10)); err != nil {
		return err
	}
	return unix.FsconfigReconfigure(fs)
}

// discard kills w's pid 1 and waits for it; everything of w is let go.
func (w *warm) discard() {
	if w.pid > 0 {
		_ = syscall.Kill(w.pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(w.pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		w.pid = 0
	}
	w.r.release()
	if w.ctl >= 0 {
		syscall.Close(w.ctl)
		w.ctl = -1
	}
	for _, u := range w.uppers {
		syscall.Close(u[1])
	}
	w.uppers = nil
}

// takeWarm returns the warm command for key, nil if there is none (a warm
// command for another key is discarded). One still being made is waited
// for.
func (s *server) takeWarm(key string) *warm {
	s.warmMu.Lock()
	for s.warming != nil {
		ch := s.warming
		s.warmMu.Unlock()
		<-ch
		s.warmMu.Lock()
	}
	w := s.warm
	s.warm = nil
	s.warmMu.Unlock()
	if w != nil && w.key != key {
		go w.discard() // off this command's way: pid 1's exit tears its namespaces down
		return nil
	}
	return w
}

// readyWarm returns the warm command for key if it is ready now, nil
// otherwise (one being made, or one for another key, is left alone).
func (s *server) readyWarm(key string) *warm {
	s.warmMu.Lock()
	defer s.warmMu.Unlock()
	w := s.warm
	if w == nil || s.warming != nil || w.key != key {
		return nil
	}
	s.warm = nil
	return w
}

// onWarm starts the command of p (fds as readPlan returns them) on w and
// closes fds; when w fails, it is discarded and fds are left as they are.
func (s *server) onWarm(w *warm, p CommandPlan, fds []int) bool {
	ups := -1
	if len(fds) > 3 {
		ups = fds[3]
	}
	if err := w.start(p, fds[0], fds[1], fds[2], ups); err != nil {
		w.discard()
		return false
	}
	closeAll(fds)
	return true
}

// prewarm makes a warm command for plans like p, unless one is there or
// being made.
func (s *server) prewarm(p CommandPlan, ups bool) {
	if !Warmable {
		return
	}
	s.warmMu.Lock()
	if s.warm != nil || s.warming != nil {
		s.warmMu.Unlock()
		return
	}
	done := make(chan struct{})
	s.warming = done
	s.warmMu.Unlock()
	go func() {
		runtime.LockOSThread()
		w, err := makeWarm(p, ups, int(s.devnull.Fd()), &s.ov)
		back := s.mntns >= 0 && setns(s.mntns, syscall.CLONE_NEWNS) == nil
		if err == nil && !back {
			// This thread ends with the goroutine, and pid 1's parent-death
			// signal with it.
			w.discard()
			err = fmt.Errorf("return to the server's mount namespace")
		}
		s.warmMu.Lock()
		if err == nil {
			s.warm = w
		}
		s.warming = nil
		close(done)
		s.warmMu.Unlock()
		if back {
			runtime.UnlockOSThread()
		}
	}()
}
