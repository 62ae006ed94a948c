package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// helperNative builds the sandbox without bubblewrap. The runner started
// this helper in new mount, pid, ipc, uts and (unless the network is shared)
// network namespaces, as host root or, for an unprivileged runner, as root of
// a new user namespace. The helper is pid 1 there: it assembles the root on
// a tmpfs (read-only system directories, the private /etc, /proc with
// /proc/sys and friends read-only, a minimal /dev, a sized tmpfs /tmp, the
// mounts nosuid,nodev), pivots into it, remounts it read-only, applies a
// Landlock domain, and starts the command in a further user namespace as the
// sandbox uid, which holds no capabilities. It exits with the command's
// status (128+n for a signal) and, being pid 1, takes every process the
// command left behind with it.
func helperNative(p plan) {
	spec := p.Spec
	// Open everything from the host before the host view goes away.
	type src struct {
		fd     int
		target string
		rw     bool
		mount  int // index in spec.Mounts, -1 for a system directory
	}
	open := func(path string) int {
		fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			fail("open %s: %v", path, err)
		}
		return fd
	}
	var srcs []src
	for _, d := range systemTop {
		fi, err := os.Lstat(d)
		if err == nil && fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
			srcs = append(srcs, src{open(d), d, false, -1})
		}
	}
	srcs = append(srcs, src{open(p.Etc), "/etc", false, -1})
	for i, m := range spec.Mounts {
		srcs = append(srcs, src{open(m.Source), m.Target, m.Writable, i})
	}
	devs := openDevs()
	root := newRoot()
	at := func(p string) string { return filepath.Join(root, p) }
	for _, s := range srcs {
		dst := at(s.target)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			fail("mount point %s: %v", s.target, err)
		}
		if s.mount >= 0 && overlayMount(p, s.mount, "/proc/self/fd/"+strconv.Itoa(s.fd), dst) {
			syscall.Close(s.fd)
			continue
		}
		bind(s.fd, dst, s.rw)
	}
	// /proc for the new pid namespace; kernel knobs read-only.
	must(os.MkdirAll(at("/proc"), 0o555), "mkdir /proc")
	must(syscall.Mount("proc", at("/proc"), "proc", procFlags(spec.NoTrace), ""), "mount /proc")
	for _, d := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs", "latency_stats", "timer_list", "kcore", "keys"} {
		pth := at("/proc/" + d)
		if _, err := os.Lstat(pth); err != nil {
			continue
		}
		if err := syscall.Mount(pth, pth, "", syscall.MS_BIND|syscall.MS_REC, ""); err == nil {
			remount(pth, true)
		}
	}
	dev := at("/dev")
	minimalDev(dev, devs)
	if os.Mkdir(filepath.Join(dev, "pts"), 0o755) == nil {
		_ = syscall.Mount("devpts", filepath.Join(dev, "pts"), "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
	}
	tmpOpts := "mode=1777"
	if spec.TmpSize > 0 {
		tmpOpts += ",size=" + strconv.FormatInt(spec.TmpSize, 10)
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		must(os.MkdirAll(at(d), 0o1777), "mkdir "+d)
		must(syscall.Mount("tmpfs", at(d), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpOpts), "mount "+d)
	}
	must(os.Chdir(root), "chdir root")
	must(syscall.PivotRoot(".", "."), "pivot_root")
	must(syscall.Unmount(".", syscall.MNT_DETACH), "detach the host root")
	must(syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"), "remount / read-only")
	must(os.Chdir("/"), "chdir /")
	_ = syscall.Sethostname([]byte("sandbox"))
	if !spec.Network {
		loopbackUp()
	}
	// Everything below applies to this (locked) thread and so to the
	// command it forks: no capabilities to regain at exec, Landlock, the
	// seccomp filter (no further user namespaces, among others).
	dropBoundingSet()
	if p.Landlock {
		applyLandlock(spec)
	}
	installFilter(spec.NoTrace)

	cmd := exec.Command("/bin/sh", "-c", spec.Command)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	// The helper's stdin is /dev/null unless Spec.Stdin gave a server's.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.Drop {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.GID), Groups: []uint32{}}
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

// procFlags are the mount flags of a command's /proc: read-only with
// noTrace (Spec.NoTrace), so no process writes another's memory through
// /proc/PID/mem (a descriptor reached through /proc/PID/fd is the file's
// own, not /proc's).
func procFlags(noTrace bool) uintptr {
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if noTrace {
		flags |= syscall.MS_RDONLY
	}
	return flags
}

// devNodes are the host device nodes a sandbox's /dev holds.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// openDevs opens the device nodes (O_PATH) while the host's /dev is in view.
func openDevs() map[string]int {
	devs := map[string]int{}
	for _, d := range devNodes {
		if fd, err := syscall.Open("/dev/"+d, oPath|syscall.O_CLOEXEC, 0); err == nil {
			devs[d] = fd
		}
	}
	return devs
}

// minimalDev mounts a sandbox's /dev at dev: a tmpfs holding the device
// nodes of devs (openDevs; their descriptors are closed), each bound
// nosuid, and the usual symlinks.
func minimalDev(dev string, devs map[string]int) {
	must(os.MkdirAll(dev, 0o755), "mkdir /dev")
	must(syscall.Mount("tmpfs", dev, "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=0755,size=64k"), "mount /dev")
	for name, fd := range devs {
		node := filepath.Join(dev, name)
		if f, err := os.Create(node); err == nil {
			f.Close()
			must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), node, "", syscall.MS_BIND, ""), "bind /dev/"+name)
			// nosuid as every other mount (a kernel before 5.12 leaves the
			// host's flags: a device node has no setuid bits to honour).
			_ = unix.MountSetattr(unix.AT_FDCWD, node, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID})
		}
		syscall.Close(fd)
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		_ = os.Symlink(to, filepath.Join(dev, name))
	}
}

// newRoot makes the mount namespace private and mounts the sandbox's root,
// a tmpfs at the temporary directory holding the merged-/usr symlinks of
// the system directories, and returns its path.
func newRoot() string {
	must(syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""), "make / private")
	root := os.TempDir()
	must(syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"), "root tmpfs")
	for _, d := range systemTop {
		fi, err := os.Lstat(d)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if to, err := os.Readlink(d); err == nil {
				must(os.Symlink(to, filepath.Join(root, d)), "symlink "+d)
			}
		}
	}
	return root
}

// bind binds the opened source fd at dst, with the mounts below it (in a
// user namespace the kernel refuses to bind a directory without the locked
// mounts it contains), and makes every one of them nosuid and nodev, and
// read-only unless rw.
func bind(fd int, dst string, rw bool) {
	must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", syscall.MS_BIND|syscall.MS_REC, ""), "bind "+dst)
	syscall.Close(fd)
	for _, mp := range mountsUnder(dst) {
		remount(mp, !rw)
	}
}

// mountsUnder lists the mount points at or below dir, parents first.
func mountsUnder(dir string) []string {
	out := []string{dir}
	b, err := os.ReadFile("/proc/thread-self/mountinfo") // a live sandbox builds a command's mounts on one thread
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount decodes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// remount sets nosuid, nodev (and rdonly) on the bind at dst, keeping the
// flags the kernel locks in a user namespace.
func remount(dst string, ro bool) {
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
	must(syscall.Mount("", dst, "", flags, ""), "remount "+dst)
}

// loopbackUp brings up lo in the new network namespace.
func loopbackUp() {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	var ifr [40]byte
	copy(ifr[:], "lo")
	*(*uint16)(unsafe.Pointer(&ifr[16])) = syscall.IFF_UP | syscall.IFF_LOOPBACK | syscall.IFF_RUNNING
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0])))
}

// Landlock (raw syscalls; ABI 1 and later).
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446

	llExecute    = 1 << 0
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llRemoveDir  = 1 << 4
	llRemoveFile = 1 << 5
	llMakeChar   = 1 << 6
	llMakeDir    = 1 << 7
	llMakeReg    = 1 << 8
	llMakeSock   = 1 << 9
	llMakeFifo   = 1 << 10
	llMakeBlock  = 1 << 11
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5
)

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, e := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, 1)
	if e != 0 {
		return 0
	}
	return int(v)
}

// applyLandlock restricts this thread (and so the command it starts) to
// reading and executing under / and writing only the writable mounts, /tmp,
// /dev/shm and the device nodes.
func applyLandlock(spec specPlan) {
	rs, proc, ok := landlockRules(spec)
	if !ok {
		return
	}
	if err := landlockAdd(rs, "/proc", proc); err != nil {
		fail("%v", err)
	}
	const prSetNoNewPrivs = 38
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		fail("no_new_privs: %v", e)
	}
	if _, _, e := syscall.Syscall(sysLandlockRestrictSelf, rs, 0, 0); e != 0 {
		fail("landlock restrict: %v", e)
	}
	syscall.Close(int(rs))
}

// landlockRules makes the ruleset of applyLandlock without the rule for
// /proc, whose access it returns (ok false: no Landlock here).
func landlockRules(spec specPlan) (rs uintptr, proc uint64, ok bool) {
	abi := landlockABI()
	if abi == 0 {
		return 0, 0, false
	}
	read := uint64(llExecute | llReadFile | llReadDir)
	write := uint64(llWriteFile | llRemoveDir | llRemoveFile | llMakeChar | llMakeDir | llMakeReg | llMakeSock | llMakeFifo | llMakeBlock | llMakeSym)
	if abi >= 2 {
		write |= llRefer
	}
	if abi >= 3 {
		write |= llTruncate
	}
	if abi >= 5 {
		write |= llIoctlDev
	}
	handled := read | write
	rs, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&handled)), 8, 0)
	if e != 0 {
		fail("landlock ruleset: %v", e)
	}
	add := func(path string, access uint64) {
		if err := landlockAdd(rs, path, access); err != nil {
			fail("%v", err)
		}
	}
	add("/", read)
	writable := []string{"/tmp", "/dev/shm", "/dev/pts"}
	for _, m := range spec.Mounts {
		if m.Writable {
			writable = append(writable, m.Target)
		}
	}
	for _, w := range writable {
		add(w, read|write)
	}
	for _, d := range devNodes {
		add("/dev/"+d, llWriteFile|llReadFile|(write&(llTruncate|llIoctlDev)))
	}
	return rs, llWriteFile | (write & llTruncate), true
}

// landlockAdd lets the ruleset rs grant access beneath path (skipped when
// path does not exist).
func landlockAdd(rs uintptr, path string, access uint64) error {
	fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var attr [12]byte // struct landlock_path_beneath_attr, packed
	*(*uint64)(unsafe.Pointer(&attr[0])) = access
	*(*int32)(unsafe.Pointer(&attr[8])) = int32(fd)
	if _, _, e := syscall.Syscall6(sysLandlockAddRule, rs, 1, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock rule %s: %v", path, e)
	}
	return nil
}

// nativeProblem says why the native sandbox cannot run here ("" when it
// can): it needs namespaces the kernel lets this process create.
func nativeProblem() string {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return "the kernel has no user namespaces"
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return "user namespaces are disabled (user.max_user_namespaces = 0)"
	}
	return ""
}
