// Package sandbox runs one shell command in isolation and knows nothing about
// agents.
//
// Guarantees of the isolating runners, Bwrap (bubblewrap) and Native (the
// runtime's own namespaces, no bubblewrap needed), which pass one
// conformance suite:
//   - the command sees only the mounts it is given plus read-only system
//     directories (/usr, /bin, /lib*, an allow-list of /etc), a fresh sized
//     tmpfs /tmp, /proc with /proc/sys read-only and a minimal /dev;
//     everything else, the root included, is read-only, and every mount is
//     nosuid,nodev; it has its own user, mount, pid, ipc, uts and network
//     namespaces, so no network unless Spec.Network (the host's) or
//     Spec.Outbound (outbound only, through pasta, which never runs as
//     root, without the host's loopback, and refusing private, link-local,
//     shared and multicast addresses but Spec.AllowNets); it holds no
//     capabilities, and no descriptor of the
//     runtime's but its stdin, stdout and stderr (not one the runtime
//     inherited without close-on-exec);
//   - a seccomp filter (seccomp_linux.go; amd64 and arm64) refuses new user
//     namespaces, io_uring, the ioctls that type into a terminal (TIOCSTI,
//     TIOCLINUX) and preallocation (fallocate, EOPNOTSUPP), and kills a
//     process making a system call through another ABI than the native
//     one (int $0x80, x32, AArch32),
//     so no rule is sidestepped that way and 32-bit programs do not run;
//     with Spec.NoTrace it also refuses ptrace, process_vm_readv,
//     process_vm_writev and pidfd_getfd, and /proc is read-only;
//   - it never runs as host uid 0: under a root runtime it runs as
//     SandboxUID, the writable mounts' contents are given to that uid first,
//     and after the command no setuid or setgid bit is left in them;
//   - Spec.Limits bound its memory and processes (cgroups where this process
//     may create them, else rlimits; Result.Mechanism says which), its /tmp
//     (tmpfs size) and the writable mounts' contents (Quota); Result.Limit
//     names the limit that stopped it and LimitNote how to raise it;
//   - at Spec.Timeout, or when ctx ends, the process group and the
//     command's cgroup are killed, and with them (through the PID namespace)
//     everything the command started, also when that lands during the
//     sandbox's startup; if the runtime dies, the command dies too;
//   - stdout and stderr are each kept up to Spec.OutputLimit bytes; the rest is
//     counted and discarded, so a command printing gigabytes costs no memory.
//
// Reuse wraps either in a Pool of live sandboxes (reuse.go): one long-lived
// sandbox per shape of command, each command a fresh process in it with the
// guarantees above, except that the commands of one live sandbox share its
// network and uts namespaces and its cgroup (Limits.Memory and
// Limits.Pids bound them together); a live sandbox that cannot start or has
// died leaves its commands to the per-command runner, never to None. A
// command returns once no process of it is left; the next command of the
// same shape may start on namespaces made ready while this one ran
// (livewarm_linux.go), new and untouched by any command.
//
// Both re-execute the running binary as a helper (helper_linux.go): any
// program importing this package, test binaries included, serves as its own
// helper through this package's init.
//
// Shared by every runner: the command's environment is exactly Spec.Env (or
// a minimal default), never the caller's; it runs in a session of its own,
// without a controlling terminal (/dev/tty does not open: an isolating
// runner's command cannot type into the terminal the runtime runs in);
// background processes left in the command's process group are killed
// when it exits; Run returns at most a short grace period after that even
// if an escaped process holds the output pipes. A timeout, or ctx reaching
// its deadline, gives Result.TimedOut and ExitCode -1 with a nil error; ctx
// being cancelled gives ExitCode -1 and an error wrapping context.Canceled.
//
// The None runner gives no isolation and no limits at all; callers must only
// use it when the user asked for it explicitly, and must record that they
// did.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/apodex/apodex/internal/watch"
)

// ErrUnavailable is returned by New when no sandbox can be built here.
var ErrUnavailable = errors.New("sandbox: no sandbox is available (bubblewrap missing and the native sandbox cannot create namespaces here); install bubblewrap (apt-get install -y bubblewrap) or pass --sandbox none to run commands without isolation")

// Mount binds a host directory into the sandbox.
type Mount struct {
	Source   string // host path
	Target   string // path inside the sandbox
	Writable bool
	// Quota, if set on a writable mount, bounds what the command may leave
	// in it (see Quota).
	Quota *Quota `json:"-"`
	// Watch, when set, says Source is a lasting directory (a plane, not a
	// per-command copy) watched in this set (package watch; a run's
	// session owns it): giving its contents to the sandbox uid, clearing
	// setuid bits and measuring its quota then cost what changed since the
	// last command, not a walk. Nil: the mount is walked.
	Watch *watch.Set `json:"-"`
	// Fresh says Source is a directory made for this one command (the
	// publishing holder's staging copy): a live sandbox (Reuse) reaches it
	// through its parent, so a new one each command needs no new sandbox.
	Fresh bool `json:"-"`
}

// Spec is one command to run.
type Spec struct {
	// Command is run by /bin/sh -c.
	Command string
	// Dir is the working directory inside the sandbox.
	Dir    string
	Mounts []Mount
	// Network shares the host network namespace (loopback included).
	Network bool
	// Outbound gives the command its own network namespace with outbound
	// access through pasta but no way to the host's loopback, nor to
	// private, link-local, shared or multicast addresses (network.go,
	// netrules_linux.go); Network wins if both are set. None treats it as
	// Network.
	Outbound bool
	// AllowNets are prefixes an Outbound command may reach although the
	// rules refuse them (a LAN service, say).
	AllowNets []netip.Prefix
	// Timeout kills the process group after this long; 0 means no limit
	// beyond ctx.
	Timeout time.Duration
	// OutputLimit caps each of stdout and stderr, in bytes; 0 means 64 KiB.
	OutputLimit int
	// Env is the complete environment ("K=V"); nil means a minimal default.
	Env []string
	// Limits bound the command's memory, processes and /tmp (zero fields:
	// the defaults). None ignores them.
	Limits Limits
	// NoTrace keeps the command's processes out of one another (a
	// verifier's test runner and the code it tests): ptrace,
	// process_vm_readv, process_vm_writev and pidfd_getfd fail with EPERM
	// and /proc is read-only, so no process writes another's memory
	// through /proc/PID/mem. Reading it (and /proc/PID/fd) stays possible
	// between processes of one uid unless the target made itself
	// non-dumpable (prctl PR_SET_DUMPABLE 0). None ignores it.
	NoTrace bool
	// Stdin and Stdout, when set, are the command's standard input and
	// output instead of /dev/null and the captured Result.Stdout: a
	// long-lived server speaking over its stdio (an MCP server), with the
	// same isolation as any command. The caller keeps its own ends of the
	// pipes and closes these once Run returns. Such a command always runs
	// in a sandbox of its own, never in a live sandbox (Reuse).
	Stdin, Stdout *os.File `json:"-"`
}

// Result is what a command did.
type Result struct {
	// ExitCode is the command's exit status, 128+n when signal n killed it,
	// or -1 when the runner killed it (timeout or cancellation).
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// StdoutBytes and StderrBytes count everything the command wrote,
	// including what was cut.
	StdoutBytes int64
	StderrBytes int64
	TimedOut    bool
	Duration    time.Duration
	// Limit names the limit the command ran into (LimitMemory, LimitPids),
	// "" if none was hit or the runner cannot tell.
	Limit string
	// UID is the host uid the command ran as; Mechanism says how its
	// limits were enforced (see Mechanism). None leaves both zero.
	UID       int
	Mechanism string
	// Limits are the limits the command ran under.
	Limits Limits
	// QuotaNote says which mount quota the command exceeded and how to
	// raise it ("" none); Limit is then the quota's name.
	QuotaNote string
}

// Truncated reports whether any output was cut.
func (r Result) Truncated() bool {
	return r.StdoutBytes > int64(len(r.Stdout)) || r.StderrBytes > int64(len(r.Stderr))
}

// Runner runs commands. Run returns an error only when the command could not
// be started or supervised; a non-zero exit or a timeout is a Result.
type Runner interface {
	Run(ctx context.Context, spec Spec) (Result, error)
}

// Kinds of runner New knows.
const (
	KindAuto   = "auto"
	KindBwrap  = "bwrap"
	KindNative = "native"
	KindNone   = "none"
)

// New returns the runner for kind: "bwrap" (bubblewrap, which must be
// usable here, else an error wrapping ErrUnavailable), "native" (the
// built-in namespace sandbox, see Native), "auto" or "" (bwrap when usable,
// else native) or "none" (no isolation; see None). It never falls back to
// none by itself.
func New(kind string) (Runner, error) {
	switch kind {
	case KindBwrap:
		path, err := probe()
		if err != nil {
			return nil, err
		}
		return &Bwrap{Path: path}, nil
	case KindNative:
		if err := nativeAvailable(); err != nil {
			return nil, err
		}
		return Native{}, nil
	case "", KindAuto:
		if path, err := probe(); err == nil {
			return &Bwrap{Path: path}, nil
		}
		if err := nativeAvailable(); err != nil {
			return nil, err
		}
		return Native{}, nil
	case KindNone:
		return None{}, nil
	}
	return nil, fmt.Errorf("sandbox: unknown kind %q (want auto, bwrap, native or none)", kind)
}

// KindOf names a runner New returned ("bwrap", "native", "none").
func KindOf(r Runner) string {
	switch p := Unwrap(r).(type) {
	case *Bwrap:
		return KindBwrap
	case Native:
		return KindNative
	case None:
		return KindNone
	case *Pool:
		return p.backend
	}
	return fmt.Sprintf("%T", r)
}
