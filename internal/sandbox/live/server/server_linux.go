// Package server is the inside of a live sandbox (package live): the
// process that holds the sandbox and starts its commands. The runner starts
// the server
// once per shape: for native, the running binary re-executed in new user,
// mount, pid, ipc, uts and network namespaces, which builds the sandbox's
// root once (the system directories, /etc, a minimal /dev, its /proc and,
// under the hidden directory, every host directory a command of this shape
// may bind) and pivots into it; for bwrap, bubblewrap running the same
// binary with the same root, built by bubblewrap, and every capability of
// bubblewrap's user namespace. The server is pid 1 of the sandbox's pid
// namespace (native) or bubblewrap's only child: when it exits, or the
// runtime dies (parent-death signals, end of file on its socket), every
// process in the sandbox dies.
//
// Per command the server builds the command's namespaces and starts it
// (command_linux.go), on namespaces made ready ahead when it can
// (warm_linux.go). Any program importing this package serves as the
// server through its init.
package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/bwrap"
	"github.com/apodex/apodex/internal/sandbox/native"
	"github.com/apodex/apodex/internal/sandbox/netns"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Env marks the server; its value is the Plan.
const Env = "APODEX_SANDBOX_SERVER"

// connFD is the server's socket to the runner.
const connFD = 3

// hiddenDir holds, in the server's root, the host directories commands
// bind (hiddenPath); each command's namespace detaches it before the
// command starts.
const hiddenDir = "/.apodex"

// HiddenPath is where mount i of a shape is in the server's root.
func HiddenPath(i int) string { return hiddenDir + "/h" + strconv.Itoa(i) }

// Plan is what the server is asked to be.
type Plan struct {
	Backend string `json:"backend"`
	Bwrap   string `json:"bwrap,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Drop    bool   `json:"drop"`
	Etc     string `json:"etc"`
	// Network says the sandbox's network namespace is the host's (or
	// wired out by pasta): no loopback of its own to bring up.
	Network bool `json:"network"`
	// Hidden are the host directories bound at HiddenPath(i).
	Hidden []Hidden `json:"hidden"`
	// Targets are the mount points the commands' mounts need.
	Targets []string `json:"targets"`
	// Inside says the server runs inside bubblewrap already.
	Inside bool `json:"inside,omitempty"`
	// Net are the rules the server installs in the outbound network
	// namespace it made (a runtime that is not root; package netns),
	// before bubblewrap, which holds no capability over it.
	Net *netns.Rules `json:"net,omitempty"`
}

// Hidden is a host directory a live sandbox holds for its commands.
type Hidden struct {
	Source   string `json:"source"`
	Writable bool   `json:"writable"`
	// Parent says Source is the parent of a Fresh mount's sources.
	Parent bool `json:"parent,omitempty"`
}

// Wire is one message between the runner and the server. The runner sends
// run (with the command's plan, stdout, stderr and, for sized overlays, the
// upper layers' socket as rights) and kill; the server sends ready once,
// then started and exit per command.
type Wire struct {
	Op string `json:"op"`
	ID uint64 `json:"id,omitempty"`
	// Status is the wait status of the command's pid 1 (exit).
	Status uint32 `json:"status,omitempty"`
	// Err says the command was never started (exit).
	Err string `json:"err,omitempty"`
	// Plan is the command's CommandPlan (run); a large one comes through a
	// pipe, the first descriptor, instead.
	Plan json.RawMessage `json:"plan,omitempty"`
	// Warm says the command started on a warm pid 1 (started; a command
	// that ends by itself says so on its status pipe too).
	Warm bool `json:"warm,omitempty"`
}

// MaxInlinePlan is the largest plan sent in the run message itself.
const MaxInlinePlan = 48 << 10

func init() {
	if raw := os.Getenv(Env); raw != "" {
		runtime.LockOSThread()
		serverMain(raw)
	}
}

func serverMain(raw string) {
	var p Plan
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		spec.Fail("bad server plan: %v", err)
	}
	if !p.Inside {
		awaitStart() // the runner puts us in our cgroups first
		if p.Net != nil {
			if err := p.Net.Apply(); err != nil {
				spec.Fail("network rules: %v", err)
			}
			p.Net = nil
		}
	}
	switch {
	case p.Backend == spec.KindBwrap && !p.Inside:
		serverBwrap(p) // becomes bubblewrap, which starts the server inside
	case p.Backend == spec.KindNative:
		serverRoot(p)
	}
	syscall.CloseOnExec(connFD)
	serve()
}

// awaitStart waits for the runner's start message.
func awaitStart() {
	buf := make([]byte, 64)
	for {
		n, _, _, _, err := syscall.Recvmsg(connFD, buf, nil, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			os.Exit(spec.HelperExit)
		}
		var m Wire
		if json.Unmarshal(buf[:n], &m) == nil && m.Op == "start" {
			return
		}
	}
}

// serverRoot builds the native sandbox's root (as helperNative does, plus
// the hidden directory and a /proc of the sandbox's pid namespace, without
// the per-command /tmp and mounts) and pivots into it.
func serverRoot(p Plan) {
	open := func(path string) int {
		fd, err := syscall.Open(path, native.OPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			spec.Fail("open %s: %v", path, err)
		}
		return fd
	}
	type src struct {
		fd     int
		target string
		rw     bool
	}
	var srcs []src
	for _, d := range bwrap.SystemTop {
		fi, err := os.Lstat(d)
		if err == nil && fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
			srcs = append(srcs, src{open(d), d, false})
		}
	}
	srcs = append(srcs, src{open(p.Etc), "/etc", false})
	for i, h := range p.Hidden {
		srcs = append(srcs, src{open(h.Source), HiddenPath(i), h.Writable})
	}
	exe := open("/proc/self/exe")
	devs := native.OpenDevs()
	root := native.NewRoot()
	at := func(p string) string { return filepath.Join(root, p) }
	native.Must(os.Mkdir(at(hiddenDir), 0o700), "mkdir "+hiddenDir)
	native.Must(syscall.Mount("tmpfs", at(hiddenDir), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0700,size=64k"), "hidden tmpfs")
	for _, s := range srcs {
		dst := at(s.target)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			spec.Fail("mount point %s: %v", s.target, err)
		}
		native.Bind(s.fd, dst, s.rw)
	}
	// The sandbox's own /proc: what a command's /proc is mounted over, and
	// the proc the server reads its own mount table from.
	native.Must(os.MkdirAll(at("/proc"), 0o555), "mkdir /proc")
	native.Must(syscall.Mount("proc", at("/proc"), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""), "mount /proc")
	dev := at("/dev")
	native.MinimalDev(dev, devs)
	native.BindFile(exe, at(spec.ConfinePath))
	for _, d := range []string{"/dev/pts", "/dev/shm", "/tmp"} {
		native.Must(os.MkdirAll(at(d), 0o755), "mkdir "+d)
	}
	for _, t := range p.Targets {
		if err := os.MkdirAll(at(t), 0o755); err != nil {
			spec.Fail("mount point %s: %v", t, err)
		}
	}
	native.Must(os.Chdir(root), "chdir root")
	native.Must(syscall.PivotRoot(".", "."), "pivot_root")
	native.Must(syscall.Unmount(".", syscall.MNT_DETACH), "detach the host root")
	native.Must(syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"), "remount / read-only")
	native.Must(syscall.Mount("", "/dev", "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=0755,size=64k"), "remount /dev read-only")
	native.Must(os.Chdir("/"), "chdir /")
	_ = syscall.Sethostname([]byte("sandbox"))
	if !p.Network {
		native.LoopbackUp()
	}
}

// serverBwrap becomes bubblewrap running the server. Started as host root,
// it first binds /etc, the hidden directories and the binary into a private
// tmpfs (opened while still root, as helperBwrap does) and drops to the
// sandbox uid.
func serverBwrap(p Plan) {
	exe, err := os.Executable()
	if err != nil {
		spec.Fail("find the binary: %v", err)
	}
	etc := p.Etc
	srcs := make([]string, len(p.Hidden))
	for i, h := range p.Hidden {
		srcs[i] = h.Source
	}
	if p.Drop {
		all := append([]string{etc, exe}, srcs...)
		fds := make([]int, len(all))
		for i, s := range all {
			fd, err := syscall.Open(s, native.OPath|syscall.O_CLOEXEC, 0)
			if err != nil {
				spec.Fail("open %s: %v", s, err)
			}
			fds[i] = fd
		}
		stage := os.TempDir()
		native.Must(syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""), "make / private")
		native.Must(syscall.Mount("tmpfs", stage, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=64k"), "stage tmpfs")
		for i, fd := range fds {
			dst := filepath.Join(stage, strconv.Itoa(i))
			if i == 1 {
				f, err := os.Create(dst)
				native.Must(err, "stage file")
				f.Close()
			} else {
				native.Must(os.Mkdir(dst, 0o755), "stage dir")
			}
			native.Must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", syscall.MS_BIND|syscall.MS_REC, ""), "stage bind")
			syscall.Close(fd)
			all[i] = dst
		}
		etc, exe, srcs = all[0], all[1], all[2:]
		native.DropTo(p.UID, p.GID)
	}
	// No --disable-userns, which nests a user namespace too (see /dev
	// below); each command's seccomp filter refuses new user namespaces.
	args := []string{"bwrap", "--unshare-all", "--unshare-user"}
	if p.Network {
		args = append(args, "--share-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--cap-add", "ALL")
	args = append(args, bwrap.SystemArgs()...)
	// /dev is assembled rather than bubblewrap's --dev, whose devpts makes
	// bubblewrap nest a second user namespace, in which every mount it made
	// is locked and a command's namespace could not detach the hidden
	// directory; each command mounts its own devpts.
	args = append(args, "--ro-bind", etc, "/etc", "--proc", "/proc", "--tmpfs", "/dev")
	for _, d := range native.DevNodes {
		args = append(args, "--dev-bind-try", "/dev/"+d, "/dev/"+d)
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		args = append(args, "--symlink", to, "/dev/"+name)
	}
	args = append(args, "--dir", "/dev/pts", "--dir", "/dev/shm", "--dir", "/tmp",
		"--perms", "0700", "--tmpfs", hiddenDir, "--ro-bind", exe, hiddenDir+"/exe", "--ro-bind", exe, spec.ConfinePath)
	for i, h := range p.Hidden {
		op := "--ro-bind"
		if h.Writable {
			op = "--bind"
		}
		args = append(args, op, srcs[i], HiddenPath(i))
	}
	for _, t := range p.Targets {
		args = append(args, "--dir", t)
	}
	p.Inside = true
	raw, err := json.Marshal(p)
	if err != nil {
		spec.Fail("%v", err)
	}
	args = append(args, "--remount-ro", "/", "--chdir", "/", "--hostname", "sandbox", "--clearenv",
		"--setenv", Env, string(raw), hiddenDir+"/exe")
	if err := syscall.Exec(p.Bwrap, args, []string{}); err != nil {
		spec.Fail("exec %s: %v", p.Bwrap, err)
	}
}

// server runs commands.
type server struct {
	devnull *os.File
	ov      native.Overlays // every command's sized overlays
	mntns   int             // the server's mount namespace, for threads to return to
	mu      sync.Mutex
	cmds    map[uint64]*serverCmd
	wmu     sync.Mutex
	// warm is the command made ready for the next one (warm_linux.go);
	// warming is closed when the one being made is done.
	warmMu  sync.Mutex
	warm    *warm
	warming chan struct{}
}

type serverCmd struct {
	pid    int // the command's pid 1, 0 until it runs
	killed bool
}

func serve() {
	devnull, err := os.Open("/dev/null")
	if err != nil {
		spec.Fail("open /dev/null: %v", err)
	}
	// Not dumpable: a command's pid 1 shares the server's memory, and no
	// process of the sandbox may open it through /proc or ptrace.
	const prSetDumpable = 4
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		spec.Fail("not dumpable: %v", e)
	}
	s := &server{devnull: devnull, cmds: map[uint64]*serverCmd{}, mntns: -1}
	if fd, err := syscall.Open("/proc/thread-self/ns/mnt", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
		s.mntns = fd
	}
	s.send(Wire{Op: "ready"})
	buf := make([]byte, MaxInlinePlan+4096)
	oob := make([]byte, syscall.CmsgSpace(8*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(connFD, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			os.Exit(0) // the runner is gone; the sandbox goes with the server
		}
		fds := rights(oob[:oobn])
		var m Wire
		if json.Unmarshal(buf[:n], &m) != nil {
			closeAll(fds)
			continue
		}
		switch m.Op {
		case "run":
			s.mu.Lock()
			s.cmds[m.ID] = &serverCmd{}
			s.mu.Unlock()
			if pid, keep, ok := s.startWarm(m.Plan, fds); ok {
				go s.wait(m.ID, pid, keep)
			} else {
				go s.run(m.ID, m.Plan, fds)
			}
		case "kill":
			closeAll(fds)
			s.kill(m.ID)
		default:
			closeAll(fds)
		}
	}
}

func (s *server) send(m Wire) {
	raw, _ := json.Marshal(m)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := syscall.Sendmsg(connFD, raw, nil, nil, 0); err != nil {
		os.Exit(0) // the runner is gone
	}
}

// run starts command id (plan, and its stdout, stderr and maybe the upper
// layers' socket in fds) and reports how it ended.
func (s *server) run(id uint64, plan []byte, fds []int) {
	// startCommand moves this thread into the command's mount namespace;
	// it goes back to the server's after, or ends with the goroutine.
	runtime.LockOSThread()
	s.mu.Lock()
	killed := s.cmds[id].killed
	s.mu.Unlock()
	if killed {
		closeAll(fds)
		s.finish(id)
		s.send(Wire{Op: "exit", ID: id, Status: uint32(syscall.SIGKILL)})
		return
	}
	pid, keep, warmed, err := s.start(plan, fds)
	if warmed || s.mntns >= 0 && setns(s.mntns, syscall.CLONE_NEWNS) == nil {
		runtime.UnlockOSThread()
	}
	if err != nil {
		keep.release()
		s.finish(id)
		s.send(Wire{Op: "exit", ID: id, Err: err.Error()})
		return
	}
	s.wait(id, pid, keep)
}

// wait reports that command id started (pid 1 pid, kept alive by keep)
// and, once pid 1 has exited, how it ended.
func (s *server) wait(id uint64, pid int, keep *rawCmd) {
	s.mu.Lock()
	c := s.cmds[id]
	c.pid = pid
	killed := c.killed
	s.mu.Unlock()
	if killed {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	s.send(Wire{Op: "started", ID: id, Warm: keep.warm != nil})
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	keep.release() // pid 1, which may have shared its memory, is gone
	s.finish(id)
	s.send(Wire{Op: "exit", ID: id, Status: uint32(ws)})
}

// start starts command id (plan, and fds as run has them): on a warm
// command if one fits (warmed), else built on this thread (which then is
// in the command's mount namespace); then it has the next one made ready.
func (s *server) start(plan []byte, fds []int) (pid int, keep *rawCmd, warmed bool, err error) {
	p, fds, err := readPlan(plan, fds)
	if err != nil {
		closeAll(fds)
		return 0, nil, false, err
	}
	ups := len(fds) > 3
	if w := s.takeWarm(warmKey(p, ups)); w != nil && s.onWarm(w, p, fds) {
		pid, keep, warmed = w.pid, w.r, true
	} else {
		pid, keep, err = startCommand(p, fds, int(s.devnull.Fd()), &s.ov)
	}
	if err == nil && p.Prewarm {
		s.prewarm(p, ups)
	}
	return pid, keep, warmed, err
}

// startWarm starts a command on the warm one, right in the server's receive
// loop, when its plan came inline and the warm command is ready and fits
// (ok); otherwise it leaves plan and fds to run.
func (s *server) startWarm(plan []byte, fds []int) (pid int, keep *rawCmd, ok bool) {
	if plan == nil {
		return 0, nil, false
	}
	p, rest, err := readPlan(plan, fds)
	if err != nil {
		return 0, nil, false
	}
	ups := len(rest) > 3
	w := s.readyWarm(warmKey(p, ups))
	if w == nil || !s.onWarm(w, p, rest) {
		return 0, nil, false // run builds it and says what fails
	}
	if p.Prewarm {
		s.prewarm(p, ups)
	}
	return w.pid, w.r, true
}

func (s *server) finish(id uint64) {
	s.mu.Lock()
	delete(s.cmds, id)
	s.mu.Unlock()
}

// kill kills command id's pid 1, and so everything the command started.
func (s *server) kill(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cmds[id]
	if c == nil {
		return
	}
	c.killed = true
	if c.pid > 0 {
		_ = syscall.Kill(c.pid, syscall.SIGKILL)
	}
}

func setns(fd, nstype int) error {
	if _, _, e := syscall.RawSyscall(sysSetns, uintptr(fd), uintptr(nstype), 0); e != 0 {
		return e
	}
	return nil
}

// rights returns the descriptors an SCM_RIGHTS message carried.
func rights(oob []byte) []int {
	cms, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var out []int
	for i := range cms {
		if fds, err := syscall.ParseUnixRights(&cms[i]); err == nil {
			out = append(out, fds...)
		}
	}
	return out
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}
