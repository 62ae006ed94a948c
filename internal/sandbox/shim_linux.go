package sandbox

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"unsafe"
)

// A shim is pid 1 of one command's pid namespace in a live sandbox, in a
// mount namespace of its own (a copy of the server's root). Once its
// command arrives it mounts what is the command's alone: a fresh sized /tmp
// and /dev/shm, the command's mounts (bound from the hidden directory, or
// sized overlays of them), a /proc of the command's pid namespace with the
// kernel knobs read-only, a new devpts; it detaches the hidden directory,
// drops every capability (bounding, inheritable and ambient sets), applies
// Landlock (native) and the seccomp filter, and starts the command as the
// sandbox uid. When the command's shell exits the shim exits with its
// status, and with the shim the whole pid namespace: background processes
// die with the command.

// shimPlan is one command for a shim.
type shimPlan struct {
	// Spec's mounts have, as Source, where the shim finds them.
	Spec     specPlan `json:"spec"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	Drop     bool     `json:"drop"`
	Rlimits  []rlim   `json:"rlimits,omitempty"`
	Landlock bool     `json:"landlock"`
}

func shimMain() {
	var buf [16]byte
	oob := make([]byte, syscall.CmsgSpace(8*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = syscall.Recvmsg(connFD, buf[:], oob, syscall.MSG_CMSG_CLOEXEC)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil || n == 0 {
		os.Exit(helperExit) // the server is gone
	}
	syscall.Close(connFD)
	fds := rights(oob[:oobn])
	if len(fds) < 3 {
		os.Exit(helperExit)
	}
	// Out of the way of the numbers they take below.
	for i, fd := range fds {
		nfd, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 10)
		if e != 0 {
			os.Exit(helperExit)
		}
		syscall.Close(fd)
		fds[i] = int(nfd)
	}
	// stdout and stderr become the command's (and a setup failure's).
	must(syscall.Dup3(fds[1], 1, 0), "dup stdout")
	must(syscall.Dup3(fds[2], 2, 0), "dup stderr")
	syscall.Close(fds[1])
	syscall.Close(fds[2])
	if len(fds) > 3 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, upperFD, syscall.F_GETFD, 0); e != syscall.EBADF {
			fail("fd %d is taken: cannot pass the upper layers", upperFD)
		}
		must(syscall.Dup3(fds[3], upperFD, syscall.O_CLOEXEC), "dup the upper layers' socket")
		syscall.Close(fds[3])
	}
	f := os.NewFile(uintptr(fds[0]), "plan")
	raw, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		fail("reading the plan: %v", err)
	}
	var p shimPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		fail("bad plan: %v", err)
	}
	shimRun(p)
}

func shimRun(p shimPlan) {
	spec := p.Spec
	tmpOpts := "mode=1777"
	if spec.TmpSize > 0 {
		tmpOpts += ",size=" + strconv.FormatInt(spec.TmpSize, 10)
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		must(syscall.Mount("tmpfs", d, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpOpts), "mount "+d)
	}
	asPlan := plan{Spec: spec}
	for i, m := range spec.Mounts {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			fail("mount point %s: %v", m.Target, err)
		}
		if overlayMount(asPlan, i, m.Source, m.Target) {
			continue
		}
		must(syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""), "bind "+m.Target)
		for _, mp := range mountsUnder(m.Target) {
			remount(mp, !m.Writable)
		}
	}
	must(syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""), "mount /proc")
	protectProc("/proc")
	_ = syscall.Mount("devpts", "/dev/pts", "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
	remount("/dev", true)
	must(syscall.Unmount(hiddenDir, syscall.MNT_DETACH), "detach "+hiddenDir)
	must(os.Chdir("/"), "chdir /")

	// Below, this (locked) thread and so the command it forks: no
	// capabilities to keep or regain, Landlock, no user namespaces.
	dropBoundingSet()
	clearCaps()
	if p.Landlock {
		applyLandlock(spec)
	}
	denyUserns()
	for _, r := range p.Rlimits {
		lim := &syscall.Rlimit{Cur: r.Value, Max: r.Value}
		if err := syscall.Setrlimit(r.Resource, lim); err != nil {
			fail("setrlimit %d: %v", r.Resource, err)
		}
	}
	runCommand(spec, p.Drop, p.UID, p.GID)
}

// protectProc makes the kernel knobs under the /proc at dir read-only.
func protectProc(dir string) {
	for _, d := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs", "latency_stats", "timer_list", "kcore", "keys"} {
		pth := dir + "/" + d
		if _, err := os.Lstat(pth); err != nil {
			continue
		}
		if err := syscall.Mount(pth, pth, "", syscall.MS_BIND|syscall.MS_REC, ""); err == nil {
			remount(pth, true)
		}
	}
}

// runCommand runs the command's shell as a child (as uid/gid when drop)
// and exits with its status, 128+n when signal n killed it.
func runCommand(spec specPlan, drop bool, uid, gid int) {
	cmd := exec.Command("/bin/sh", "-c", spec.Command)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if drop {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			fail("chdir %s: %v", spec.Dir, err)
		}
		fail("start the command: %v", err)
	}
	err := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		os.Exit(128 + int(ws.Signal()))
	case err != nil && !errors.As(err, new(*exec.ExitError)):
		fail("wait: %v", err)
	}
	os.Exit(ws.ExitStatus())
}

// clearCaps empties this thread's ambient and inheritable capabilities
// (bubblewrap's --cap-add sets both), so nothing survives the exec.
func clearCaps() {
	const prCapAmbient, prCapAmbientClearAll = 47, 4
	_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	hdr := struct {
		version uint32
		pid     int32
	}{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		fail("capget: %v", e)
	}
	data[0].inheritable, data[1].inheritable = 0, 0
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		fail("capset: %v", e)
	}
}
