package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound one command. Zero fields take the defaults below; a negative
// field means no limit.
type Limits struct {
	Memory  int64 // bytes of memory (cgroup memory, else RLIMIT_AS)
	Pids    int64 // processes and threads (cgroup pids, else RLIMIT_NPROC)
	TmpSize int64 // bytes of the tmpfs /tmp (and /dev/shm)
	// Workspace is the quota of the mount at /workspace (zero fields: the
	// defaults; negative: unlimited); a mount's own Quota wins.
	Workspace Quota
}

// Defaults of Limits.
const (
	DefaultMemory  = 4 << 30
	DefaultPids    = 512
	DefaultTmpSize = 512 << 20
)

func (l Limits) withDefaults() Limits {
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
	return l
}

// Limit names, as in Result.Limit.
const (
	LimitMemory = "memory"
	LimitPids   = "pids"
	// LimitSparse: sparse files larger than their quota were removed
	// (sparse.go).
	LimitSparse = "sparse_file"
)

// cgroup is one command's cgroups: a v2 group (for an atomic kill, and its
// memory and pids controllers where enabled) and v1 memory and pids groups
// where those hierarchies exist. Any part may be missing.
type cgroup struct {
	v2       string // directory, "" if none
	v2fd     int
	v1       map[string]string // controller -> directory
	memory   string            // mechanism of the memory limit ("" none)
	pids     string
	removeMu sync.Mutex
}

var cgSeq atomic.Int64

// cgroupRoot is where cgroup hierarchies are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// ownCgroup returns this process's path in the hierarchy whose
// /proc/self/cgroup line has the given controller ("" for v2).
func ownCgroup(controller string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller && controller != "" {
				return parts[2]
			}
		}
	}
	return "/"
}

// newCgroup makes the groups for one command and sets lim in them; what it
// cannot make is left to rlimits.
func newCgroup(lim Limits) *cgroup {
	cg := &cgroup{v1: map[string]string{}, v2fd: -1}
	name := fmt.Sprintf("apodex-%d-%d", os.Getpid(), cgSeq.Add(1))
	// v2: the unified hierarchy (hybrid) or the root (pure v2).
	for _, base := range []string{filepath.Join(cgroupRoot, "unified"), cgroupRoot} {
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err != nil {
			continue
		}
		parent := v2Parent(base)
		sweepCgroups(parent)
		dir := filepath.Join(parent, name)
		if os.Mkdir(dir, 0o755) != nil {
			break
		}
		fd, err := syscall.Open(dir, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			_ = os.Remove(dir)
			break
		}
		cg.v2, cg.v2fd = dir, fd
		if lim.Memory > 0 && write(dir, "memory.max", lim.Memory) == nil {
			_ = write(dir, "memory.swap.max", 0)
			cg.memory = "cgroup-v2"
		}
		if lim.Pids > 0 && write(dir, "pids.max", lim.Pids) == nil {
			cg.pids = "cgroup-v2"
		}
		break
	}
	for _, c := range []string{"memory", "pids"} {
		if (c == "memory" && (cg.memory != "" || lim.Memory <= 0)) || (c == "pids" && (cg.pids != "" || lim.Pids <= 0)) {
			continue
		}
		base := filepath.Join(cgroupRoot, c)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		parent := filepath.Join(base, ownCgroup(c))
		sweepCgroups(parent)
		dir := filepath.Join(parent, name)
		if os.Mkdir(dir, 0o755) != nil {
			continue
		}
		var err error
		if c == "memory" {
			if err = write(dir, "memory.limit_in_bytes", lim.Memory); err == nil {
				_ = write(dir, "memory.memsw.limit_in_bytes", lim.Memory)
				cg.memory = "cgroup-v1"
			}
		} else if err = write(dir, "pids.max", lim.Pids); err == nil {
			cg.pids = "cgroup-v1"
		}
		if err != nil {
			_ = os.Remove(dir)
			continue
		}
		cg.v1[c] = dir
	}
	return cg
}

var v2Parents struct {
	sync.Mutex
	m map[string]string // base -> the directory command groups go in
}

// v2Parent is the v2 group under base the command groups go in: this
// process's own. Where this process may write it (root, or a group
// delegated to its user, e.g. by systemd's Delegate=yes) but the memory
// and pids controllers are not enabled for its children, the process moves
// into a leaf of its own (apodex-PID-runtime) first, as cgroup v2 enables
// controllers only below a group without processes, and enables them; if
// that fails it moves back and the commands' limits fall back to rlimits.
// Decided once per process and base.
func v2Parent(base string) string {
	v2Parents.Lock()
	defer v2Parents.Unlock()
	if p, ok := v2Parents.m[base]; ok {
		return p
	}
	own := filepath.Join(base, ownCgroup(""))
	if v2Parents.m == nil {
		v2Parents.m = map[string]string{}
	}
	v2Parents.m[base] = own
	if enabled(own, "memory", "pids") {
		return own
	}
	avail, _ := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	var want []string
	for _, c := range []string{"memory", "pids"} {
		if slices.Contains(strings.Fields(string(avail)), c) && !enabled(own, c) {
			want = append(want, c)
		}
	}
	if len(want) == 0 {
		return own
	}
	leaf := filepath.Join(own, fmt.Sprintf("apodex-%d-runtime", os.Getpid()))
	if os.Mkdir(leaf, 0o755) != nil && !isDir(leaf) {
		return own
	}
	if write(leaf, "cgroup.procs", int64(os.Getpid())) != nil {
		_ = os.Remove(leaf)
		return own
	}
	for _, c := range want {
		_ = os.WriteFile(filepath.Join(own, "cgroup.subtree_control"), []byte("+"+c), 0)
	}
	if !enabled(own, want...) {
		_ = write(own, "cgroup.procs", int64(os.Getpid()))
		_ = os.Remove(leaf)
	}
	return own
}

// enabled says the controllers are enabled for dir's children.
func enabled(dir string, controllers ...string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return false
	}
	for _, c := range controllers {
		if !slices.Contains(strings.Fields(string(b)), c) {
			return false
		}
	}
	return true
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

var swept sync.Map // parent directory -> true

// sweepCgroups removes, once per process and parent, the empty groups a
// runtime that died left behind (named after its pid, which is gone).
func sweepCgroups(parent string) {
	if _, done := swept.LoadOrStore(parent, true); done {
		return
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "apodex-")
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = os.Remove(filepath.Join(parent, e.Name())) // fails if not empty
	}
}

func write(dir, file string, v int64) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0)
}

// join puts pid into the v1 groups (the v2 group is joined at clone).
func (cg *cgroup) join(pid int) error {
	for c, dir := range cg.v1 {
		if err := write(dir, "cgroup.procs", int64(pid)); err != nil {
			return fmt.Errorf("sandbox: join the %s cgroup: %w", c, err)
		}
	}
	return nil
}

// kill kills every process in the groups.
func (cg *cgroup) kill() {
	if cg.v2 != "" && write(cg.v2, "cgroup.kill", 1) == nil {
		return
	}
	for _, dir := range cg.v1 {
		for range 50 {
			b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil || len(strings.TrimSpace(string(b))) == 0 {
				break
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(time.Millisecond)
		}
		return
	}
}

// hit says which limit the command ran into ("" none).
func (cg *cgroup) hit() string {
	read := func(dir, file string) string {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		return string(b)
	}
	count := func(text, key string) int64 {
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == key {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
		return 0
	}
	if d := cg.v1["memory"]; d != "" && (count(read(d, "memory.oom_control"), "oom_kill") > 0 || strings.TrimSpace(read(d, "memory.failcnt")) != "0") {
		return LimitMemory
	}
	if cg.memory == "cgroup-v2" && (count(read(cg.v2, "memory.events"), "oom_kill") > 0 || count(read(cg.v2, "memory.events"), "max") > 0) {
		return LimitMemory
	}
	if d := cg.v1["pids"]; d != "" && count(read(d, "pids.events"), "max") > 0 {
		return LimitPids
	}
	if cg.pids == "cgroup-v2" && count(read(cg.v2, "pids.events"), "max") > 0 {
		return LimitPids
	}
	return ""
}

// remove kills what is left and removes the groups.
func (cg *cgroup) remove() {
	cg.removeMu.Lock()
	defer cg.removeMu.Unlock()
	dirs := []string{}
	if cg.v2 != "" {
		dirs = append(dirs, cg.v2)
		syscall.Close(cg.v2fd)
	}
	for _, d := range cg.v1 {
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		return
	}
	cg.kill()
	for _, d := range dirs {
		for i := 0; i < 200 && os.Remove(d) != nil; i++ {
			time.Sleep(time.Millisecond)
		}
	}
}

// Options configure a runner for a whole run.
type Options struct {
	// Limits apply to every spec that sets no limits of its own.
	Limits Limits
	// Outbound turns a spec's Network into Outbound: the network without
	// the host's loopback (the default of --network; --network host
	// leaves it false).
	Outbound bool
	// AllowNets are given to every spec that sets none (Spec.AllowNets).
	AllowNets []netip.Prefix
}

// WithOptions returns r configured by o.
func WithOptions(r Runner, o Options) Runner {
	if _, ok := r.(None); ok || r == nil {
		return r
	}
	return limited{r, o}
}

type limited struct {
	Runner
	o Options
}

func (l limited) Run(ctx context.Context, spec Spec) (Result, error) {
	if spec.Limits == (Limits{}) {
		spec.Limits = l.o.Limits
	}
	if spec.Network && l.o.Outbound {
		spec.Network, spec.Outbound = false, true
	}
	if spec.AllowNets == nil {
		spec.AllowNets = l.o.AllowNets
	}
	return l.Runner.Run(ctx, spec)
}

// Unwrap returns the runner WithOptions wrapped.
func Unwrap(r Runner) Runner {
	if l, ok := r.(limited); ok {
		return l.Runner
	}
	return r
}

// LimitNote says which limit stopped the command and how to raise it, ""
// when none did.
func (r Result) LimitNote() string {
	lim := r.Limits
	switch {
	case r.QuotaNote != "":
		return r.QuotaNote
	case r.Limit == LimitMemory:
		return fmt.Sprintf("the command hit the memory limit of %s and was killed; use less memory, or raise it with --mem-limit (task budget key mem_limit)", human(lim.Memory))
	case r.Limit == LimitPids:
		return fmt.Sprintf("the command hit the process limit of %d (fork failed or it was stopped); start fewer processes, or raise it with --pids-limit (task budget key pids_limit)", lim.Pids)
	case r.Mechanism != "" && (bytes.Contains(r.Stderr, []byte("No space left on device")) || bytes.Contains(r.Stdout, []byte("No space left on device"))):
		return fmt.Sprintf("a device was full: /tmp holds at most %s; write large files under /workspace, or raise it with --tmp-size (task budget key tmp_size)", human(lim.TmpSize))
	case r.Mechanism != "" && bytes.Contains(r.Stderr, []byte("fallocate")) && bytes.Contains(r.Stderr, []byte("Operation not supported")):
		return "preallocation (fallocate) is refused in the sandbox, as on a file system without it: quotas count what is written; write the data itself (glibc's posix_fallocate does so already)"
	case r.Mechanism != "" && strings.Contains(r.Mechanism, "pids=rlimit") && bytes.Contains(r.Stderr, []byte("fork")):
		return fmt.Sprintf("fork may have failed at the process limit of %d; raise it with --pids-limit", lim.Pids)
	}
	return ""
}

func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
