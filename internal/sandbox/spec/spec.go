// Package spec is the sandbox's vocabulary, shared by package sandbox and
// every implementation below it: what a command asks for (Spec, Mount,
// Quota, Limits), what it did (Result), the Runner every implementation
// satisfies, and the checks every runner applies to a Spec before it runs
// (Env, CheckMounts), the host ids it runs as (IDs), and the conventions
// of the processes the runtime re-executes itself as to build a sandbox
// (SelfExe, Fail, HelperExit). It runs nothing itself.
// Package sandbox re-exports these names; code outside the sandbox uses
// them from there.
package spec

import (
	"context"
	"errors"
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
	// private, link-local, shared or multicast addresses (package netns);
	// Network wins if both are set. None treats it as
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
