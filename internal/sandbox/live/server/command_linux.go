package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/native"
	"github.com/apodex/apodex/internal/sandbox/spec"
	"golang.org/x/sys/unix"
)

// One command in a live sandbox, on the server's side. The server builds
// the command's mount namespace on an OS thread of its own (unshared from
// the server's, never given back: the goroutine ends locked): a fresh sized
// /tmp and /dev/shm, the command's mounts (bound from the hidden
// directory, or sized overlays of them), a new devpts, /dev read-only, the
// hidden directory detached. From that thread it forks (no exec: the
// child runs only raw system calls, prepared beforehand) the command's
// first process in new pid and ipc namespaces; as pid 1 there it starts a
// session of its own (no controlling terminal), mounts the command's /proc
// (kernel knobs read-only), drops every capability (bounding, ambient,
// inheritable), sets its rlimits, no_new_privs, Landlock (native) and the
// seccomp filter, closes every descriptor it does not need, and forks the
// command's shell as the sandbox uid. When the shell
// exits, pid 1 exits with its status (128+n for signal n) and the pid
// namespace, with everything the command left running, goes with it.

// CommandPlan is one command for the server.
type CommandPlan struct {
	// Spec's mounts have, as Source, where the server finds them.
	Spec     native.SpecPlan `json:"spec"`
	UID      int             `json:"uid"`
	GID      int             `json:"gid"`
	Drop     bool            `json:"drop"`
	Rlimits  []limits.Rlimit `json:"rlimits,omitempty"`
	Landlock bool            `json:"landlock"`
	// Prewarm says the next command is likely the same but for its
	// command line, environment and directory (no Fresh mounts): the
	// server makes one ready while this one runs (warm_linux.go).
	Prewarm bool `json:"prewarm,omitempty"`
}

// procKnobs are the entries of /proc a command gets read-only.
var procKnobs = []string{"sys", "sysrq-trigger", "irq", "bus", "fs", "latency_stats", "timer_list", "kcore", "keys"}

// rawCmd is everything the command's pid 1 and shell need, made before the
// fork: they run no Go runtime code, only system calls on this memory.
type rawCmd struct {
	proc, procType *byte
	procFlags      uintptr
	knobs          []*byte // /proc/<knob>, those that exist
	capHdr         [2]uint32
	capData        [6]uint32
	rlimits        []rlimit64
	landlock       int // ruleset fd, -1 none
	procRule       [12]byte
	seccomp        unsafe.Pointer
	stdin          int
	stdout, stderr int
	// status is where pid 1 tells the runner the command's exit status
	// once no process of the command is left.
	status     int
	drop       bool
	uid, gid   int
	dir        *byte
	sh         *byte
	argv, envv []*byte
	failSetup  []byte
	failDir    []byte
	failExec   []byte
	// stack holds the stacks of pid 1 and of the shell until its exec,
	// where they share the server's memory (forkInit).
	stack []byte
	// warm, for a pid 1 made ready ahead (warm_linux.go), is where it
	// receives its stdout and stderr, at warmCtlFD, once its command
	// (argv, envv, dir) is filled in; ctl is that socket in the server.
	warm *warmMsg
	ctl  int
}

type rlimit64 struct {
	resource int
	cur, max uint64
}

// readPlan reads the command's plan: raw, or when that is nil the pipe
// that is the first of fds (closed then). It returns the other fds:
// stdout, stderr, the status pipe and maybe the upper layers' socket.
func readPlan(raw []byte, fds []int) (CommandPlan, []int, error) {
	var p CommandPlan
	if raw == nil && len(fds) > 0 { // a large plan comes through a pipe
		f := os.NewFile(uintptr(fds[0]), "plan")
		var err error
		raw, err = io.ReadAll(f)
		f.Close()
		fds = fds[1:]
		if err != nil {
			return p, fds, fmt.Errorf("read the plan: %w", err)
		}
	}
	if len(fds) < 3 {
		return p, fds, fmt.Errorf("a command needs a plan, stdout, stderr and a status pipe")
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fds, fmt.Errorf("bad plan: %w", err)
	}
	return p, fds, nil
}

// startCommand builds the command's namespace on the calling thread (which
// must be locked and is spoilt for anything else afterwards) and starts
// it. fds are as readPlan returns them; it closes
// them. It returns pid 1 of the command and what must be kept alive
// (runtime.KeepAlive) until pid 1 has exited.
func startCommand(p CommandPlan, fds []int, devnull int, ov *native.Overlays) (int, *rawCmd, error) {
	defer closeAll(fds)
	var pass func(i, fd int) error
	if len(fds) > 3 {
		ups := fds[3]
		pass = func(i, fd int) error {
			defer syscall.Close(fd)
			return passUpper(ups, i, fd)
		}
	}
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return 0, nil, fmt.Errorf("unshare the mount namespace: %w", err)
	}
	// Failures from here on are the command's: its stderr says why.
	r := &rawCmd{landlock: -1, stdin: devnull, stdout: fds[0], stderr: fds[1], status: fds[2], drop: p.Drop, uid: p.UID, gid: p.GID, ctl: -1}
	if msg := buildNamespace(p.Spec, pass, ov); msg != "" {
		r.failSetup = []byte("apodex sandbox: " + msg + "\n")
	}
	err := r.prepare(p)
	if err == nil {
		err = r.command(p.Spec)
	}
	if err != nil && r.failSetup == nil {
		r.failSetup = []byte("apodex sandbox: " + err.Error() + "\n")
	}
	pid, err := r.fork()
	if r.landlock >= 0 {
		syscall.Close(r.landlock)
	}
	return pid, r, err
}

// passUpper sends the upper layer (fd) of mount i to the runner through
// the command's socket ups.
func passUpper(ups, i, fd int) error {
	var msg [4]byte
	binary.LittleEndian.PutUint32(msg[:], uint32(i))
	return syscall.Sendmsg(ups, msg[:], syscall.UnixRights(fd), nil, 0)
}

// buildNamespace mounts the command's own file systems in this thread's
// mount namespace; it returns what failed ("" nothing). A sized mount
// becomes an overlay whose upper layer goes to pass (which owns the
// descriptor from then on), or without pass a bind.
func buildNamespace(spec native.SpecPlan, pass func(i, fd int) error, ov *native.Overlays) string {
	try := func(err error, what string) string {
		if err != nil {
			return what + ": " + err.Error()
		}
		return ""
	}
	if msg := try(syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""), "make / private"); msg != "" {
		return msg
	}
	tmpOpts := "mode=1777"
	if spec.TmpSize > 0 {
		tmpOpts += ",size=" + strconv.FormatInt(spec.TmpSize, 10)
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		if msg := try(syscall.Mount("tmpfs", d, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpOpts), "mount "+d); msg != "" {
			return msg
		}
	}
	var bound []int   // mounts bound (not overlays)
	recursive := true // mount_setattr restricts each bind and what it brought along
	for i, m := range spec.Mounts {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return fmt.Sprintf("mount point %s: %v", m.Target, err)
		}
		if pass != nil && i < len(spec.Sized) && spec.Sized[i] > 0 {
			fd, err := ov.Sized(m.Source, m.Target, filepath.Join("/tmp", ".upper-"+strconv.Itoa(i)), spec.Sized[i])
			if err == nil {
				if err := pass(i, fd); err != nil {
					return fmt.Sprintf("pass the upper layer of %s: %v", m.Target, err)
				}
				continue
			}
		}
		if msg := try(syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""), "bind "+m.Target); msg != "" {
			return msg
		}
		bound = append(bound, i)
		// nosuid, nodev and, unless writable, read-only for the bind and
		// every mount it brought along, before a deeper command mount
		// comes on top of it (which gets its own).
		if recursive {
			attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
			if !m.Writable {
				attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
			}
			if unix.MountSetattr(unix.AT_FDCWD, m.Target, unix.AT_RECURSIVE, &attr) != nil {
				recursive = false // the remounts below say what fails
			}
		}
	}
	// Without mount_setattr (before Linux 5.12, or where it refused): every
	// bind and the mounts it brought along as the deepest command mount
	// holding them says (one reading of the mount table for all).
	if len(bound) > 0 && !recursive {
		for _, mp := range mountPoints() {
			i := holder(spec.Mounts, mp)
			if i < 0 || !slices.Contains(bound, i) {
				continue // not the command's, or a sized overlay
			}
			if msg := tryRemount(mp, !spec.Mounts[i].Writable); msg != "" {
				return msg
			}
		}
	}
	_ = syscall.Mount("devpts", "/dev/pts", "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
	if msg := tryRemount("/dev", true); msg != "" {
		return msg
	}
	return try(syscall.Unmount(hiddenDir, syscall.MNT_DETACH), "detach "+hiddenDir)
}

// mountPoints lists this thread's mount points.
func mountPoints() []string {
	b, _ := os.ReadFile("/proc/thread-self/mountinfo")
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 {
			out = append(out, native.UnescapeMount(f[4]))
		}
	}
	return out
}

// holder is the index of the deepest mount whose target holds mount point
// mp, -1 none.
func holder(ms []spec.Mount, mp string) int {
	best := -1
	for i, m := range ms {
		if (mp == m.Target || strings.HasPrefix(mp, m.Target+"/")) && (best < 0 || len(m.Target) > len(ms[best].Target)) {
			best = i
		}
	}
	return best
}

// tryRemount is remount reporting instead of failing.
func tryRemount(dst string, ro bool) string {
	var st syscall.Statfs_t
	_ = syscall.Statfs(dst, &st)
	flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_NOSUID | syscall.MS_NODEV)
	for _, m := range [][2]uintptr{{8, syscall.MS_NOEXEC}, {1024, syscall.MS_NOATIME}, {2048, syscall.MS_NODIRATIME}, {4096, syscall.MS_RELATIME}} {
		if uintptr(st.Flags)&m[0] != 0 {
			flags |= m[1]
		}
	}
	if ro || st.Flags&1 != 0 {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("", dst, "", flags, ""); err != nil {
		return "remount " + dst + ": " + err.Error()
	}
	return ""
}

// prepare fills in r from p but for the command itself (command).
func (r *rawCmd) prepare(p CommandPlan) error {
	var err error
	bytePtr := func(s string) *byte {
		b, e := syscall.BytePtrFromString(s)
		if e != nil && err == nil {
			err = e
		}
		return b
	}
	r.proc, r.procType = bytePtr("/proc"), bytePtr("proc")
	for _, k := range procKnobs {
		if _, e := os.Lstat("/proc/" + k); e == nil {
			r.knobs = append(r.knobs, bytePtr("/proc/"+k))
		}
	}
	r.sh = bytePtr("/bin/sh")
	r.failExec = []byte("apodex sandbox: start the command: cannot run /bin/sh\n")
	for _, l := range p.Rlimits {
		r.rlimits = append(r.rlimits, rlimit64{resource: l.Resource, cur: l.Value, max: l.Value})
	}
	// Capabilities: this thread's, inheritable ones cleared.
	r.capHdr = [2]uint32{0x20080522, 0} // _LINUX_CAPABILITY_VERSION_3
	if _, _, e := syscall.RawSyscall6(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&r.capHdr)), uintptr(unsafe.Pointer(&r.capData[0])), 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("capget: %v", e)
	}
	r.capData[2], r.capData[5] = 0, 0
	r.seccomp = native.CommandFilter(p.Spec.NoTrace)
	r.procFlags = native.ProcFlags(p.Spec.NoTrace)
	if p.Landlock {
		if rs, proc, ok := native.LandlockRules(p.Spec); ok {
			r.landlock = int(rs)
			*(*uint64)(unsafe.Pointer(&r.procRule[0])) = proc
		}
	}
	return err
}

// command fills in the command line, environment and directory of spec.
func (r *rawCmd) command(spec native.SpecPlan) error {
	dir, err := syscall.BytePtrFromString(spec.Dir)
	if err != nil {
		return err
	}
	argv, err := syscall.SlicePtrFromStrings([]string{"/bin/sh", "-c", spec.Command})
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(spec.Env)
	if err != nil {
		return err
	}
	r.dir, r.argv, r.envv = dir, argv, envv
	r.failDir = []byte("apodex sandbox: chdir " + spec.Dir + ": no such directory in the sandbox\n")
	return nil
}

// fork starts the command's pid 1 in new pid and ipc namespaces: SysV
// shared memory, semaphores and message queues a command leaves go with
// it.
func (r *rawCmd) fork() (int, error) {
	var all, old [1]uint64
	all[0] = ^uint64(0)
	const sigSetmask = 2
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigSetmask, uintptr(unsafe.Pointer(&all[0])), uintptr(unsafe.Pointer(&old[0])), 8, 0, 0)
	pid, e := forkInit(r, syscall.CLONE_NEWPID|syscall.CLONE_NEWIPC|uintptr(syscall.SIGCHLD))
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, sigSetmask, uintptr(unsafe.Pointer(&old[0])), 0, 8, 0, 0)
	if e != 0 {
		return 0, fmt.Errorf("fork the command: %v", e)
	}
	return int(pid), nil
}

// Raw system call numbers package syscall leaves out.
const (
	sysCloseRange   = 436
	prSetPdeathsig  = 1
	prSetNoNewPrivs = 38
	prCapbsetDrop   = 24
	prCapAmbient    = 47
	prCapAmbientClr = 4
	prSetSeccomp    = 22
	seccompFilter   = 2
	atFdcwd         = ^uintptr(99) // AT_FDCWD, -100
)

// commandInit is pid 1 of the command. It runs in a forked copy of the
// server with one thread and every signal blocked, so it makes system calls
// only.
//
//go:nosplit
//go:norace
func commandInit(r *rawCmd) {
	syscall.RawSyscall6(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	placeFDs(r)
	if r.failSetup != nil {
		rawFail(r.failSetup)
	}
	// A session of its own, so no controlling terminal to type into
	// (supervise says why), whichever session the server is in.
	if _, _, e := syscall.RawSyscall6(syscall.SYS_SETSID, 0, 0, 0, 0, 0, 0); e != 0 {
		rawFail(msgSetsid)
	}
	// The command's own /proc, kernel knobs read-only.
	if _, _, e := syscall.RawSyscall6(syscall.SYS_MOUNT, uintptr(unsafe.Pointer(r.procType)), uintptr(unsafe.Pointer(r.proc)), uintptr(unsafe.Pointer(r.procType)),
		r.procFlags, 0, 0); e != 0 {
		rawFail(msgMountProc)
	}
	for i := 0; i < len(r.knobs); i++ {
		k := uintptr(unsafe.Pointer(r.knobs[i]))
		if _, _, e := syscall.RawSyscall6(syscall.SYS_MOUNT, k, k, 0, syscall.MS_BIND|syscall.MS_REC, 0, 0); e == 0 {
			syscall.RawSyscall6(syscall.SYS_MOUNT, 0, k, 0, syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, 0, 0)
		}
	}
	if r.landlock >= 0 {
		fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, atFdcwd, uintptr(unsafe.Pointer(r.proc)), native.OPath|syscall.O_CLOEXEC, 0, 0, 0)
		if e == 0 {
			*(*int32)(unsafe.Pointer(&r.procRule[8])) = int32(fd)
			syscall.RawSyscall6(native.SysLandlockAddRule, 3, 1, uintptr(unsafe.Pointer(&r.procRule[0])), 0, 0, 0)
			syscall.RawSyscall6(syscall.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
		}
	}
	// No capabilities to keep or regain, limits, no new privileges,
	// Landlock, the seccomp filter.
	for c := uintptr(0); c < 64; c++ {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, c, 0, 0, 0, 0); e == syscall.EINVAL {
			break
		}
	}
	syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClr, 0, 0, 0, 0)
	if _, _, e := syscall.RawSyscall6(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&r.capHdr[0])), uintptr(unsafe.Pointer(&r.capData[0])), 0, 0, 0, 0); e != 0 {
		rawFail(msgCapset)
	}
	for i := 0; i < len(r.rlimits); i++ {
		l := &r.rlimits[i]
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, uintptr(l.resource), uintptr(unsafe.Pointer(&l.cur)), 0, 0, 0); e != 0 {
			rawFail(msgSetrlimit)
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		rawFail(msgNoNewPrivs)
	}
	if r.landlock >= 0 {
		if _, _, e := syscall.RawSyscall6(native.SysLandlockRestrictSelf, 3, 0, 0, 0, 0, 0); e != 0 {
			rawFail(msgLandlock)
		}
		syscall.RawSyscall6(syscall.SYS_CLOSE, 3, 0, 0, 0, 0, 0)
	}
	if r.seccomp != nil {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSeccomp, seccompFilter, uintptr(r.seccomp), 0, 0, 0); e != 0 {
			rawFail(msgSeccomp)
		}
	}
	if r.warm != nil {
		awaitCommand(r.warm)
	}
	sh, e := forkShell(r)
	if e != 0 {
		rawFail(msgFork)
	}
	// Reap until the shell is gone (orphans of the command end up here too).
	var status uint32
	for {
		w, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(&status)), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			rawExit(spec.HelperExit)
		}
		if w == sh {
			break
		}
	}
	ws := syscall.WaitStatus(status)
	code := int(ws>>8) & 0xff
	if ws&0x7f != 0 && ws&0x7f != 0x7f { // signaled
		code = 128 + int(ws&0x7f)
	}
	// Every other process of the command is killed and reaped (kill -1
	// from pid 1 reaches all of its namespace but itself; a fork racing it
	// fails, its parent being killed), then stdio is let go and the
	// status told: the runner reads the command's output and files with
	// nothing of it left running, before pid 1's exit has torn down the
	// namespaces.
	syscall.RawSyscall6(syscall.SYS_KILL, ^uintptr(0), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), 0, 0, 0, 0, 0)
		if e != syscall.EINTR && e != 0 {
			break // ECHILD: none left
		}
	}
	syscall.RawSyscall6(sysCloseRange, 0, 2, 0, 0, 0, 0)
	// The status, and whether pid 1 was a warm one.
	told := [2]byte{byte(code), 0}
	if r.warm != nil {
		told[1] = 1
	}
	syscall.RawSyscall6(syscall.SYS_WRITE, statusFD, uintptr(unsafe.Pointer(&told[0])), 2, 0, 0, 0)
	rawExit(code)
}

// statusFD is pid 1's status pipe to the runner.
const statusFD = 5

// placeFDs puts what pid 1 keeps at fixed descriptors: stdio at 0, 1, 2 (a
// warm pid 1 has /dev/null until its command comes), a Landlock ruleset at
// 3, a warm pid 1's socket at warmCtlFD, the status pipe at statusFD
// (close-on-exec); nothing else survives. Each first moves past every
// target, so none is overwritten before it is moved. (A function of its
// own keeps commandInit's frame small: pid 1 runs on a fixed stack, where
// every nosplit frame of the deepest call chain counts.)
//
//go:nosplit
//go:norace
func placeFDs(r *rawCmd) {
	kept := [6]int{r.stdin, r.stdout, r.stderr, r.landlock, r.ctl, r.status}
	if r.warm != nil {
		kept[1], kept[2], kept[5] = r.stdin, r.stdin, -1
	}
	for i, fd := range kept {
		if fd >= 0 {
			moved, _, _ := syscall.RawSyscall6(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 16, 0, 0, 0)
			kept[i] = int(moved)
		}
	}
	for i, fd := range kept {
		switch {
		case fd < 0:
			syscall.RawSyscall6(syscall.SYS_CLOSE, uintptr(i), 0, 0, 0, 0, 0)
		case i == statusFD:
			syscall.RawSyscall6(syscall.SYS_DUP3, uintptr(fd), uintptr(i), syscall.O_CLOEXEC, 0, 0, 0)
		default:
			syscall.RawSyscall6(syscall.SYS_DUP3, uintptr(fd), uintptr(i), 0, 0, 0, 0)
		}
	}
	syscall.RawSyscall6(sysCloseRange, statusFD+1, ^uintptr(0), 0, 0, 0, 0)
}

// commandShell is the command's shell, pid 2 of its namespace.
//
//go:nosplit
//go:norace
func commandShell(r *rawCmd) {
	if r.drop {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_SETGROUPS, 0, 0, 0, 0, 0, 0); e != 0 {
			rawFail(msgSetgroups)
		}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_SETRESGID, uintptr(r.gid), uintptr(r.gid), uintptr(r.gid), 0, 0, 0); e != 0 {
			rawFail(msgSetgid)
		}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_SETRESUID, uintptr(r.uid), uintptr(r.uid), uintptr(r.uid), 0, 0, 0); e != 0 {
			rawFail(msgSetuid)
		}
	}
	syscall.RawSyscall6(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	if _, _, e := syscall.RawSyscall6(syscall.SYS_CHDIR, uintptr(unsafe.Pointer(r.dir)), 0, 0, 0, 0, 0); e != 0 {
		rawFail(r.failDir)
	}
	var none [1]uint64
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, 2, uintptr(unsafe.Pointer(&none[0])), 0, 8, 0, 0)
	syscall.RawSyscall6(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(r.sh)), uintptr(unsafe.Pointer(&r.argv[0])), uintptr(unsafe.Pointer(&r.envv[0])), 0, 0, 0)
	rawFail(r.failExec)
}

// Messages of commandInit and commandShell, made before any fork.
var (
	msgSetsid     = []byte("apodex sandbox: setsid\n")
	msgMountProc  = []byte("apodex sandbox: mount /proc\n")
	msgCapset     = []byte("apodex sandbox: capset\n")
	msgSetrlimit  = []byte("apodex sandbox: setrlimit\n")
	msgNoNewPrivs = []byte("apodex sandbox: no_new_privs\n")
	msgLandlock   = []byte("apodex sandbox: landlock restrict\n")
	msgSeccomp    = []byte("apodex sandbox: seccomp\n")
	msgFork       = []byte("apodex sandbox: fork the command\n")
	msgSetgroups  = []byte("apodex sandbox: setgroups\n")
	msgSetgid     = []byte("apodex sandbox: setgid\n")
	msgSetuid     = []byte("apodex sandbox: setuid\n")
)

// rawFail writes msg to stderr (the command's) and exits as the helper does
// when it cannot set up the sandbox.
//
//go:nosplit
//go:norace
func rawFail(msg []byte) {
	if len(msg) > 0 {
		syscall.RawSyscall6(syscall.SYS_WRITE, 2, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)), 0, 0, 0)
	}
	rawExit(spec.HelperExit)
}

//go:nosplit
//go:norace
func rawExit(code int) {
	for {
		syscall.RawSyscall6(syscall.SYS_EXIT_GROUP, uintptr(code), 0, 0, 0, 0, 0)
	}
}
