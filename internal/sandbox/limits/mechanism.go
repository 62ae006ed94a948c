package limits

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Mechanism says how lim is enforced for a command in cg, e.g.
// "memory=cgroup-v2 pids=cgroup-v2 pidns ipcns tmp=tmpfs workspace=overlay";
// it is recorded with the run (run_started.sandbox.limits_mechanism). Every
// command has a pid namespace of its own (so nothing it starts outlives it
// and, without a cgroup, RLIMIT_NPROC counts the sandbox uid's processes in
// it) and an IPC namespace of its own (so no SysV shared memory outlives
// it), on both backends, live or not; workspace=overlay: the workspace
// quota is a hard bound (a sized overlay), workspace=measured: it is
// measured only (Quota.RefuseNear negative, or no quota).
func Mechanism(cg *Cgroup, lim spec.Limits) string {
	mem, pids := cg.memory, cg.pids
	if mem == "" && lim.Memory > 0 {
		mem = "rlimit-as+sum" // each process by RLIMIT_AS, their sum measured (MemoryWatch)
	}
	if pids == "" && lim.Pids > 0 {
		pids = "rlimit-nproc"
		if _, _, drop := spec.IDs(); !drop && !NprocPerUserns() {
			pids = "none"
		}
	}
	if mem == "" {
		mem = "none"
	}
	if pids == "" {
		pids = "none"
	}
	ws := "overlay"
	if w := lim.Workspace; w.Bytes <= 0 || !w.Refuse && w.RefuseNear <= 0 {
		ws = "measured"
	}
	return fmt.Sprintf("memory=%s pids=%s pidns ipcns tmp=tmpfs workspace=%s", mem, pids, ws)
}

// NprocPerUserns says RLIMIT_NPROC counts the processes of a uid in one
// user namespace (Linux 5.14 and later): a runtime that is not root can
// then bound a sandbox's processes with it, its own user namespace being
// the sandbox's, without counting the user's processes outside it. Before,
// it counted every process of the uid on the host.
var NprocPerUserns = sync.OnceValue(func() bool { return KernelAtLeast(5, 14) })

// KernelAtLeast reports whether the running kernel is release major.minor
// or later (false when it cannot tell).
func KernelAtLeast(major, minor int) bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var rel []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var ma, mi int
	if _, err := fmt.Sscanf(string(rel), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// Tally is what a walk of the mounts measured of those with a quota, by
// index in the command's mounts: bytes (as the quota counts them) and
// entries.
type Tally map[int][2]int64

// Rlimit is one resource limit the sandbox's first process sets
// (setrlimit) for what a cgroup cannot bound here.
type Rlimit struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// Rlimits are the limits of lim that cg cannot enforce here; drop says the
// runtime is root (the command runs as the sandbox uid).
func Rlimits(cg *Cgroup, lim spec.Limits, drop bool) []Rlimit {
	var out []Rlimit
	if cg.memory == "" && lim.Memory > 0 {
		out = append(out, Rlimit{Resource: syscall.RLIMIT_AS, Value: uint64(lim.Memory)})
	}
	if cg.pids == "" && lim.Pids > 0 && (drop || NprocPerUserns()) {
		const rlimitNproc = 6
		out = append(out, Rlimit{Resource: rlimitNproc, Value: uint64(lim.Pids)})
	}
	return out
}
