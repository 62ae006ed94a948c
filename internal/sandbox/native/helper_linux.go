package native

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/bwrap"
	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/netns"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// The helper is the first process of every sandboxed command: the runner
// re-executes the current binary (apodex, or a test binary) with helperEnv
// set, and this package's init takes over before main or TestMain run. It
// reads its plan from fd 3 (the runner writes the plan only once the helper
// sits in its cgroups, so nothing it starts escapes them), then either
// applies the rlimits and becomes bubblewrap as the sandbox uid, or builds
// the native sandbox itself (native_linux.go) and applies them right before
// it starts the command. It never returns to the host program.

// helperEnv marks a process as the sandbox helper.
const helperEnv = "APODEX_SANDBOX_HELPER"

func init() {
	if os.Getenv(helperEnv) == "1" {
		runtime.LockOSThread()
		helperMain()
	}
}

// plan is what the helper is asked to do.
type plan struct {
	Backend string `json:"backend"` // "bwrap" or "native"
	Bwrap   string `json:"bwrap,omitempty"`
	// UID and GID are the host ids the command runs as; Drop says the
	// helper starts as host root and must switch to them.
	UID     int             `json:"uid"`
	GID     int             `json:"gid"`
	Drop    bool            `json:"drop"`
	Etc     string          `json:"etc"`
	Spec    SpecPlan        `json:"spec"`
	Rlimits []limits.Rlimit `json:"rlimits,omitempty"`
	// Landlock applies a Landlock domain (native) when the kernel has it.
	Landlock bool `json:"landlock"`
	// Net are the rules the helper installs in the outbound network
	// namespace it made (a runtime that is not root; package netns).
	Net *netns.Rules `json:"net,omitempty"`
}

// SpecPlan is the part of Spec the helper needs.
type SpecPlan struct {
	Command string       `json:"command"`
	Dir     string       `json:"dir"`
	Mounts  []spec.Mount `json:"mounts"`
	Env     []string     `json:"env"`
	Network bool         `json:"network"`
	TmpSize int64        `json:"tmp_size"`
	// Sized gives, by index in Mounts, the size of the upper layer of a
	// mount that becomes a sized overlay (overlay_linux.go); 0 binds it.
	Sized []int64 `json:"sized,omitempty"`
	// NoTrace is Spec.NoTrace.
	NoTrace bool `json:"no_trace,omitempty"`
}

func helperMain() {
	f := os.NewFile(3, "plan")
	raw, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		spec.Fail("reading the plan: %v", err)
	}
	var p plan
	if err := json.Unmarshal(raw, &p); err != nil {
		spec.Fail("bad plan: %v", err)
	}
	if len(raw) == 0 {
		os.Exit(spec.HelperExit) // the runner gave up before the start
	}
	// The command holds stdio only: not upperFD, nor a descriptor the
	// runtime inherited without close-on-exec (a host directory, which
	// opens the host's files past every mount, or a terminal).
	closeOnExecAbove2()
	if p.Net != nil {
		if err := p.Net.Apply(); err != nil {
			spec.Fail("network rules: %v", err)
		}
	}
	switch p.Backend {
	case "bwrap":
		setRlimits(p)
		helperBwrap(p, &Overlays{})
	case "native":
		helperNative(p, &Overlays{})
	}
	spec.Fail("unknown backend %q", p.Backend)
}

// setRlimits applies the plan's rlimits to this process and what it
// starts. The native helper applies them only right before it starts the
// command: its own Go runtime builds the sandbox unbounded by RLIMIT_AS.
func setRlimits(p plan) {
	for _, r := range p.Rlimits {
		lim := &syscall.Rlimit{Cur: r.Value, Max: r.Value}
		if err := syscall.Setrlimit(r.Resource, lim); err != nil {
			spec.Fail("setrlimit %d: %v", r.Resource, err)
		}
	}
}

// sysCloseRange is close_range(2), which package syscall does not name.
const sysCloseRange = 436

// closeOnExecAbove2 marks every descriptor but 0, 1 and 2 close-on-exec.
func closeOnExecAbove2() {
	const closeRangeCloexec = 1 << 2
	if _, _, e := syscall.RawSyscall(sysCloseRange, 3, ^uintptr(0), closeRangeCloexec); e == 0 {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd") // before Linux 5.11
	if err != nil {
		spec.Fail("list descriptors: %v", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// helperBwrap execs bubblewrap. Started as host root, it first binds every
// mount source (opened while still root, so a 0700 run directory on the way
// does not matter) into a private tmpfs the sandbox uid can traverse, then
// drops to that uid, so bwrap's user namespace maps the command onto it and
// never onto host root. A sized mount (overlay_linux.go) is staged there as
// an overlay, which bwrap binds in place of the source. bwrap installs the
// seccomp filter (seccomp_linux.go) before it runs the command.
func helperBwrap(p plan, ov *Overlays) {
	sp := spec.Spec{Command: p.Spec.Command, Dir: p.Spec.Dir, Env: p.Spec.Env, Network: p.Spec.Network, Mounts: p.Spec.Mounts, NoTrace: p.Spec.NoTrace}
	etc := p.Etc
	sized := false
	for _, n := range p.Spec.Sized {
		sized = sized || n > 0
	}
	exe, err := os.Executable() // bound at spec.ConfinePath
	if err != nil {
		spec.Fail("find the binary: %v", err)
	}
	if p.Drop || sized {
		// Every source is opened before the staging tmpfs covers the host's
		// /tmp (where a source may live), and bound into it.
		stage := os.TempDir()
		exeFD, err := syscall.Open("/proc/self/exe", OPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			spec.Fail("open the binary: %v", err)
		}
		var fds []int
		for _, src := range append([]string{etc}, sources(sp.Mounts)...) {
			fd, err := syscall.Open(src, OPath|syscall.O_CLOEXEC, 0)
			if err != nil {
				spec.Fail("open %s: %v", src, err)
			}
			fds = append(fds, fd)
		}
		Must(syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""), "make / private")
		Must(syscall.Mount("tmpfs", stage, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=64k"), "stage tmpfs")
		stageDir := func(name string) string {
			dst := filepath.Join(stage, name)
			Must(os.Mkdir(dst, 0o755), "stage dir")
			return dst
		}
		bindFD := func(fd int, name string) string {
			dst := stageDir(name)
			Must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", syscall.MS_BIND|syscall.MS_REC, ""), "stage bind")
			return dst
		}
		etc = bindFD(fds[0], "etc")
		syscall.Close(fds[0])
		exe = filepath.Join(stage, "exe")
		f, err := os.Create(exe)
		Must(err, "stage file")
		f.Close()
		Must(syscall.Mount("/proc/self/fd/"+strconv.Itoa(exeFD), exe, "", syscall.MS_BIND, ""), "stage bind")
		syscall.Close(exeFD)
		for i := range sp.Mounts {
			fd := fds[i+1]
			if dst := stageDir("overlay-" + strconv.Itoa(i)); ov.mount(p, i, "/proc/self/fd/"+strconv.Itoa(fd), dst) {
				sp.Mounts[i].Source = dst
			} else {
				sp.Mounts[i].Source = bindFD(fd, strconv.Itoa(i))
			}
			syscall.Close(fd)
		}
		if p.Drop {
			DropTo(p.UID, p.GID)
		}
	}
	args, err := bwrap.Args(sp, etc)
	if err != nil {
		spec.Fail("%v", err)
	}
	args = bwrap.BeforeRootReadOnly(args, "--ro-bind", exe, spec.ConfinePath)
	if p.Spec.TmpSize > 0 {
		args = bwrap.WithTmpSize(args, p.Spec.TmpSize)
	}
	if prog := filterBytes(p.Spec.NoTrace); prog != nil {
		args = append([]string{"--seccomp", strconv.Itoa(filterFD(prog))}, args...)
	}
	if err := syscall.Exec(p.Bwrap, append([]string{"bwrap"}, args...), []string{}); err != nil {
		spec.Fail("exec %s: %v", p.Bwrap, err)
	}
}

// filterFD returns a descriptor, kept across exec, from which bubblewrap
// reads the seccomp filter prog (--seccomp) and installs it right before it
// runs the command.
func filterFD(prog []byte) int {
	var fds [2]int
	Must(syscall.Pipe(fds[:]), "pipe for the seccomp filter")
	if n, err := syscall.Write(fds[1], prog); err != nil || n != len(prog) {
		spec.Fail("write the seccomp filter: %d bytes, %v", n, err) // a pipe holds far more
	}
	syscall.Close(fds[1])
	return fds[0]
}

func sources(ms []spec.Mount) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Source
	}
	return out
}

// DropTo switches the whole process to uid/gid with no supplementary
// groups, and re-arms the parent-death signal the credential change cleared.
func DropTo(uid, gid int) {
	ppid := os.Getppid()
	Must(syscall.Setgroups([]int{}), "setgroups")
	Must(syscall.Setgid(gid), "setgid")
	Must(syscall.Setuid(uid), "setuid")
	setPdeathsig()
	if os.Getppid() != ppid {
		os.Exit(spec.HelperExit) // the runner died while we switched
	}
}

func setPdeathsig() {
	const prSetPdeathsig = 1
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0)
}

// Must fails the process (spec.Fail) with what when err is not nil.
func Must(err error, what string) {
	if err != nil {
		spec.Fail("%s: %v", what, err)
	}
}

// OPath is O_PATH, which package syscall does not name.
const OPath = 0x200000
