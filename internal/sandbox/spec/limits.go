package spec

import (
	"bytes"
	"fmt"
	"strings"
)

// Limits bound one command. Zero fields take the defaults below; a negative
// field means no limit.
type Limits struct {
	Memory  int64 // bytes of memory (cgroup memory, else RLIMIT_AS)
	Pids    int64 // processes and threads (cgroup pids, else RLIMIT_NPROC)
	TmpSize int64 // bytes of the tmpfs /tmp (and /dev/shm)
	// Workspace is the quota of the mount at /workspace (zero fields: the
	// defaults; negative: unlimited, and a negative RefuseNear: measured,
	// not hard); a mount's own Quota wins.
	Workspace Quota
}

// Defaults of Limits.
const (
	DefaultMemory  = 4 << 30
	DefaultPids    = 512
	DefaultTmpSize = 512 << 20
)

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	if l.TmpSize == 0 {
		l.TmpSize = DefaultTmpSize
	}
	if l.Workspace.Bytes == 0 {
		l.Workspace.Bytes = DefaultWorkspaceBytes
	}
	if l.Workspace.Files == 0 {
		l.Workspace.Files = DefaultWorkspaceFiles
	}
	if l.Workspace.RefuseNear == 0 {
		l.Workspace.RefuseNear = DefaultWorkspaceRefuseNear
	}
	return l
}

// Limit names, as in Result.Limit.
const (
	LimitMemory = "memory"
	LimitPids   = "pids"
	// LimitSparse: sparse files larger than their quota were removed
	// (package limits).
	LimitSparse = "sparse_file"
)

// LimitNote says which limit stopped the command and how to raise it, ""
// when none did.
func (r Result) LimitNote() string {
	lim := r.Limits
	switch {
	case r.QuotaNote != "":
		return r.QuotaNote
	case r.Limit == LimitMemory:
		return fmt.Sprintf("the command hit the memory limit of %s and was killed; use less memory, or raise it with --mem-limit (task budget key mem_limit)", Human(lim.Memory))
	case r.Limit == LimitPids:
		return fmt.Sprintf("the command hit the process limit of %d (fork failed or it was stopped); start fewer processes, or raise it with --pids-limit (task budget key pids_limit)", lim.Pids)
	case r.Mechanism != "" && (bytes.Contains(r.Stderr, []byte("No space left on device")) || bytes.Contains(r.Stdout, []byte("No space left on device"))):
		return fmt.Sprintf("a device was full: /tmp holds at most %s; write large files under /workspace, or raise it with --tmp-size (task budget key tmp_size)", Human(lim.TmpSize))
	case r.Mechanism != "" && bytes.Contains(r.Stderr, []byte("fallocate")) && bytes.Contains(r.Stderr, []byte("Operation not supported")):
		return "preallocation (fallocate) is refused in the sandbox, as on a file system without it: quotas count what is written; write the data itself (glibc's posix_fallocate does so already)"
	case r.Mechanism != "" && strings.Contains(r.Mechanism, "pids=rlimit") && bytes.Contains(r.Stderr, []byte("fork")):
		return fmt.Sprintf("fork may have failed at the process limit of %d; raise it with --pids-limit", lim.Pids)
	}
	return ""
}

// Human writes a byte count as people read it ("4GiB", "512MiB", "100 bytes").
func Human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Quota bounds what a writable mount may hold: allocated bytes (blocks on
// disk, so a sparse file counts what it really uses) and entries (files,
// directories, links). Zero fields are unlimited. With Refuse or a positive
// RefuseNear the bytes are a hard bound: the command writes into a sized
// overlay (package native) whose upper layer holds what the quota has left
// (with RefuseNear, at most RefuseNear of it: one command's share) and a
// write past it fails in the command (ENOSPC); what it wrote is kept and
// merged into the mount when it ends. In that overlay a file changed in
// place is copied up whole, so it needs room for all of it, and renaming a
// directory that was there before fails (EXDEV; mv copies instead).
// Otherwise, and for entries, the runner measures the mount while the
// command runs (every 100 ms at most, package limits) and kills the
// command once it grows a mount past its quota; a write that fits between
// two measurements is kept and reported in Result.Limit; preallocation
// cannot outrun a measurement, the seccomp filter refusing fallocate.
// Nothing already written is removed.
type Quota struct {
	Bytes int64
	Files int64
	// Apparent counts Bytes as the sizes of the regular files instead of
	// the blocks allocated (the publication plane's scratch quota).
	Apparent bool
	// Refuse makes Bytes a hard bound for the command (a sized overlay of
	// the mount) where the kernel allows it.
	Refuse bool
	// RefuseNear makes Bytes a hard bound as Refuse does, with one
	// command's share at most this many bytes (the overlay's upper layer
	// is a tmpfs, charged to the command's memory): a command writing more
	// in one go gets ENOSPC, and the next has the same share again, up to
	// the quota. 0 or negative: the bytes are measured only (but see
	// Limits.Workspace).
	RefuseNear int64
	// Name is the limit's name in Result.Limit and Hint says how to raise
	// it, e.g. "--workspace-quota".
	Name, Hint string
}

// Defaults of the workspace quota (Limits.Workspace).
const (
	DefaultWorkspaceBytes = 10 << 30
	DefaultWorkspaceFiles = 1_000_000
	// DefaultWorkspaceRefuseNear: the built-in ceiling of the workspace
	// (DefaultWorkspaceBytes, a guard against a runaway command rather than
	// a quota anyone asked for) is measured (-1), not a hard bound: the hard
	// bound's per-command overlay hides from a running command what others
	// write to /workspace meanwhile, holds its writes in memory until it
	// ends and refuses renaming a directory that was there before. A quota
	// that is asked for (--workspace-quota, a task's workspace_quota) is a
	// hard bound with DefaultWorkspaceShare (package runflags, eval).
	DefaultWorkspaceRefuseNear = -1
	// DefaultWorkspaceShare is one command's share (Quota.RefuseNear) of a
	// workspace quota that was asked for: the quota is a hard bound.
	DefaultWorkspaceShare = 256 << 20
)

// Over says how m is over its quota ("" if it is not).
func (q Quota) Over(bytes, files int64) string {
	switch {
	case q.Bytes > 0 && bytes > q.Bytes:
		what := "allocated"
		if q.Apparent {
			what = "in files"
		}
		return fmt.Sprintf("%s of %s %s", Human(bytes), Human(q.Bytes), what)
	case q.Files > 0 && files > q.Files:
		return fmt.Sprintf("%d of %d files", files, q.Files)
	}
	return ""
}
