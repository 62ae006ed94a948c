package native

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/apodex/apodex/internal/sandbox/bwrap"
	"github.com/apodex/apodex/internal/sandbox/spec"
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
func helperNative(p plan, ov *Overlays) {
	sp := p.Spec
	// Open everything from the host before the host view goes away.
	type src struct {
		fd     int
		target string
		rw     bool
		mount  int // index in sp.Mounts, -1 for a system directory
	}
	open := func(path string) int {
		fd, err := syscall.Open(path, OPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			spec.Fail("open %s: %v", path, err)
		}
		return fd
	}
	var srcs []src
	for _, d := range bwrap.SystemTop {
		fi, err := os.Lstat(d)
		if err == nil && fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
			srcs = append(srcs, src{open(d), d, false, -1})
		}
	}
	srcs = append(srcs, src{open(p.Etc), "/etc", false, -1})
	for i, m := range sp.Mounts {
		srcs = append(srcs, src{open(m.Source), m.Target, m.Writable, i})
	}
	exe := open("/proc/self/exe")
	devs := OpenDevs()
	root := NewRoot()
	at := func(p string) string { return filepath.Join(root, p) }
	for _, s := range srcs {
		dst := at(s.target)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			spec.Fail("mount point %s: %v", s.target, err)
		}
		if s.mount >= 0 && ov.mount(p, s.mount, "/proc/self/fd/"+strconv.Itoa(s.fd), dst) {
			syscall.Close(s.fd)
			continue
		}
		Bind(s.fd, dst, s.rw)
	}
	BindFile(exe, at(spec.ConfinePath))
	// /proc for the new pid namespace; kernel knobs read-only.
	Must(os.MkdirAll(at("/proc"), 0o555), "mkdir /proc")
	Must(syscall.Mount("proc", at("/proc"), "proc", ProcFlags(sp.NoTrace), ""), "mount /proc")
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
	MinimalDev(dev, devs)
	if os.Mkdir(filepath.Join(dev, "pts"), 0o755) == nil {
		_ = syscall.Mount("devpts", filepath.Join(dev, "pts"), "devpts", syscall.MS_NOSUID|syscall.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
	}
	tmpOpts := "mode=1777"
	if sp.TmpSize > 0 {
		tmpOpts += ",size=" + strconv.FormatInt(sp.TmpSize, 10)
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		Must(os.MkdirAll(at(d), 0o1777), "mkdir "+d)
		Must(syscall.Mount("tmpfs", at(d), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpOpts), "mount "+d)
	}
	Must(os.Chdir(root), "chdir root")
	Must(syscall.PivotRoot(".", "."), "pivot_root")
	Must(syscall.Unmount(".", syscall.MNT_DETACH), "detach the host root")
	Must(syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"), "remount / read-only")
	Must(os.Chdir("/"), "chdir /")
	_ = syscall.Sethostname([]byte("sandbox"))
	if !sp.Network {
		LoopbackUp()
	}
	// Everything below applies to this (locked) thread and so to the
	// command it forks: no capabilities to regain at exec, Landlock, the
	// seccomp filter (no further user namespaces, among others).
	dropBoundingSet()
	if p.Landlock {
		applyLandlock(sp)
	}
	installFilter(sp.NoTrace)

	cmd := exec.Command("/bin/sh", "-c", sp.Command)
	cmd.Dir = sp.Dir
	cmd.Env = sp.Env
	// The helper's stdin is /dev/null unless Spec.Stdin gave a server's.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.Drop {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.GID), Groups: []uint32{}}
	}
	setRlimits(p)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			spec.Fail("chdir %s: %v", sp.Dir, err)
		}
		spec.Fail("start the command: %v", err)
	}
	err := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		os.Exit(128 + int(ws.Signal()))
	case err != nil && !errors.As(err, new(*exec.ExitError)):
		spec.Fail("wait: %v", err)
	}
	os.Exit(ws.ExitStatus())
}

// ProcFlags are the mount flags of a command's /proc: read-only with
// noTrace (Spec.NoTrace), so no process writes another's memory through
// /proc/PID/mem (a descriptor reached through /proc/PID/fd is the file's
// own, not /proc's).
func ProcFlags(noTrace bool) uintptr {
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if noTrace {
		flags |= syscall.MS_RDONLY
	}
	return flags
}

// DevNodes are the host device nodes a sandbox's /dev holds.
var DevNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// OpenDevs opens the device nodes (O_PATH) while the host's /dev is in view.
func OpenDevs() map[string]int {
	devs := map[string]int{}
	for _, d := range DevNodes {
		if fd, err := syscall.Open("/dev/"+d, OPath|syscall.O_CLOEXEC, 0); err == nil {
			devs[d] = fd
		}
	}
	return devs
}

// MinimalDev mounts a sandbox's /dev at dev: a tmpfs holding the device
// nodes of devs (openDevs; their descriptors are closed), each bound
// nosuid, and the usual symlinks.
func MinimalDev(dev string, devs map[string]int) {
	Must(os.MkdirAll(dev, 0o755), "mkdir /dev")
	Must(syscall.Mount("tmpfs", dev, "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=0755,size=64k"), "mount /dev")
	for name, fd := range devs {
		node := filepath.Join(dev, name)
		if f, err := os.Create(node); err == nil {
			f.Close()
			Must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), node, "", syscall.MS_BIND, ""), "bind /dev/"+name)
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

// NewRoot makes the mount namespace private and mounts the sandbox's root,
// a tmpfs at the temporary directory holding the merged-/usr symlinks of
// the system directories, and returns its path.
func NewRoot() string {
	Must(syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""), "make / private")
	root := os.TempDir()
	Must(syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"), "root tmpfs")
	for _, d := range bwrap.SystemTop {
		fi, err := os.Lstat(d)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if to, err := os.Readlink(d); err == nil {
				Must(os.Symlink(to, filepath.Join(root, d)), "symlink "+d)
			}
		}
	}
	return root
}

// Bind binds the opened source fd at dst, with the mounts below it (in a
// user namespace the kernel refuses to bind a directory without the locked
// mounts it contains), and makes every one of them nosuid and nodev, and
// read-only unless rw.
func Bind(fd int, dst string, rw bool) {
	Must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", syscall.MS_BIND|syscall.MS_REC, ""), "bind "+dst)
	syscall.Close(fd)
	for _, mp := range mountsUnder(dst) {
		remount(mp, !rw)
	}
}

// BindFile binds the opened file fd read-only (nosuid, nodev) at dst, a
// file it creates with its parents.
func BindFile(fd int, dst string) {
	Must(os.MkdirAll(filepath.Dir(dst), 0o755), "mkdir "+filepath.Dir(dst))
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	Must(err, "mount point "+dst)
	f.Close()
	Bind(fd, dst, false)
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
		mp := UnescapeMount(f[4])
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// UnescapeMount decodes the octal escapes (\040 for a space) of mountinfo.
func UnescapeMount(s string) string {
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
	Must(syscall.Mount("", dst, "", flags, ""), "remount "+dst)
}

// LoopbackUp brings up lo in the new network namespace.
func LoopbackUp() {
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

// Problem says why the native sandbox cannot run here ("" when it
// can): it needs namespaces the kernel lets this process create.
func Problem() string {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return "the kernel has no user namespaces"
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return "user namespaces are disabled (user.max_user_namespaces = 0)"
	}
	return ""
}
