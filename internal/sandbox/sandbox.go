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
//   - a seccomp filter (package native; amd64 and arm64) refuses new user
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
// Reuse wraps either in a Pool of live sandboxes (package live): one long-lived
// sandbox per shape of command, each command a fresh process in it with the
// guarantees above, except that the commands of one live sandbox share its
// network and uts namespaces and its cgroup (Limits.Memory and
// Limits.Pids bound them together); a live sandbox that cannot start or has
// died leaves its commands to the per-command runner, never to None. A
// command returns once no process of it is left; the next command of the
// same shape may start on namespaces made ready while this one ran
// (package live/server), new and untouched by any command.
//
// Both re-execute the running binary as a helper (package native), a live
// sandbox's server (package live/server) or the maker of an outbound
// network (package netns): any program importing this package, test
// binaries included, serves as all of them through their packages' init.
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
//
// This package is the sandbox's API: the runners and their constructor,
// with the vocabulary of package spec under its own names. The work is
// done below it, one package per responsibility: spec (the vocabulary and
// the checks of a Spec), command (one command's life on the runtime's
// side: mounts handed over and measured, supervision, the result), limits
// (cgroups, rlimits, quotas), netns (the outbound network), bwrap
// (bubblewrap's command line), native (the helper process, the native
// sandbox, Landlock, seccomp, sized overlays), live and live/server (live
// sandboxes), etccopy (the private /etc).
package sandbox

import (
	"fmt"

	"github.com/apodex/apodex/internal/sandbox/live"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// The vocabulary (package spec).
type (
	// Mount binds a host directory into the sandbox.
	Mount = spec.Mount
	// Spec is one command to run.
	Spec = spec.Spec
	// Result is what a command did.
	Result = spec.Result
	// Runner runs commands. Run returns an error only when the command
	// could not be started or supervised; a non-zero exit or a timeout is
	// a Result.
	Runner = spec.Runner
	// Limits bound one command; zero fields take the defaults.
	Limits = spec.Limits
	// Quota bounds what a writable mount may hold.
	Quota = spec.Quota
	// Pool runs commands in live sandboxes (Reuse).
	Pool = live.Pool
)

// ErrUnavailable is returned by New when no sandbox can be built here.
var ErrUnavailable = spec.ErrUnavailable

// Kinds of runner New knows.
const (
	KindAuto   = spec.KindAuto
	KindBwrap  = spec.KindBwrap
	KindNative = spec.KindNative
	KindNone   = spec.KindNone
)

// Defaults of Limits and of the workspace quota.
const (
	DefaultMemory         = spec.DefaultMemory
	DefaultPids           = spec.DefaultPids
	DefaultTmpSize        = spec.DefaultTmpSize
	DefaultWorkspaceBytes = spec.DefaultWorkspaceBytes
	DefaultWorkspaceFiles = spec.DefaultWorkspaceFiles
	// DefaultWorkspaceRefuseNear: the built-in workspace ceiling is
	// measured (spec.DefaultWorkspaceRefuseNear).
	DefaultWorkspaceRefuseNear = spec.DefaultWorkspaceRefuseNear
	// DefaultWorkspaceShare is one command's share of an asked workspace
	// quota, which is then a hard bound.
	DefaultWorkspaceShare = spec.DefaultWorkspaceShare
)

// Limit names, as in Result.Limit.
const (
	LimitMemory = spec.LimitMemory
	LimitPids   = spec.LimitPids
	LimitSparse = spec.LimitSparse
)

// ConfinePath is where every sandbox holds the confine tool: a process
// there runs "ConfinePath -hide /tests -- PROG ARGS..." to start PROG
// unable to read the hidden paths or to reach into its starter (ptrace,
// /proc/PID/mem, signals); see package native.
const ConfinePath = spec.ConfinePath

// SandboxUID and SandboxGID are the host ids sandboxed commands run as when
// the runtime runs as root (nobody/nogroup): never host uid 0.
const (
	SandboxUID = spec.SandboxUID
	SandboxGID = spec.SandboxGID
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
	case *live.Pool:
		return p.Backend()
	}
	return fmt.Sprintf("%T", r)
}

// CommandUID is the host uid sandboxed commands run as in this process.
func CommandUID() int { uid, _, _ := spec.IDs(); return uid }

// Effective returns lim with the defaults filled in.
func Effective(lim Limits) Limits { return lim.WithDefaults() }
