// Package limits enforces and measures what bounds one sandboxed command:
// its cgroups (memory and pids, with an atomic kill of every process in
// them), the rlimits that stand in where no cgroup can be made (Rlimits,
// Mechanism says which applied), the counters that tell which limit a
// command ran into, the quotas of writable mounts (measured while the
// command runs, QuotaWatch) and the sparse files too large for their
// quota. A cgroup is owned by one Cgroup value and removed by it; what is
// process-wide is what the kernel makes so: the v2 group this process
// moves itself into to enable controllers (v2Parent), decided once per
// process, and the sweep of groups dead runtimes left behind.
package limits

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apodex/apodex/internal/sandbox/spec"
	"golang.org/x/sys/unix"
)

// Cgroup is one command's cgroups: a v2 group (for an atomic kill, and its
// memory and pids controllers where enabled) and v1 memory and pids groups
// where those hierarchies exist. Any part may be missing.
type Cgroup struct {
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

// NewCgroup makes the groups for one command and sets lim in them; what it
// cannot make is left to rlimits.
func NewCgroup(lim spec.Limits) *Cgroup {
	cg := &Cgroup{v1: map[string]string{}, v2fd: -1}
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
		fd, err := syscall.Open(dir, unix.O_PATH|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
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

// V2FD is a descriptor of the v2 group for clone's CLONE_INTO_CGROUP (ok
// false: no v2 group).
func (cg *Cgroup) V2FD() (fd int, ok bool) { return cg.v2fd, cg.v2 != "" }

// Join puts pid into the v1 groups (the v2 group is joined at clone).
func (cg *Cgroup) Join(pid int) error {
	for c, dir := range cg.v1 {
		if err := write(dir, "cgroup.procs", int64(pid)); err != nil {
			return fmt.Errorf("sandbox: join the %s cgroup: %w", c, err)
		}
	}
	return nil
}

// Kill kills every process in the groups.
func (cg *Cgroup) Kill() {
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

// Hit says which limit the command ran into ("" none).
func (cg *Cgroup) Hit() string {
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
		return spec.LimitMemory
	}
	if cg.memory == "cgroup-v2" && (count(read(cg.v2, "memory.events"), "oom_kill") > 0 || count(read(cg.v2, "memory.events"), "max") > 0) {
		return spec.LimitMemory
	}
	if d := cg.v1["pids"]; d != "" && count(read(d, "pids.events"), "max") > 0 {
		return spec.LimitPids
	}
	if cg.pids == "cgroup-v2" && count(read(cg.v2, "pids.events"), "max") > 0 {
		return spec.LimitPids
	}
	return ""
}

// Remove kills what is left and removes the groups.
func (cg *Cgroup) Remove() {
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
	cg.Kill()
	for _, d := range dirs {
		for i := 0; i < 200 && os.Remove(d) != nil; i++ {
			time.Sleep(time.Millisecond)
		}
	}
}
