package limits

import (
	"os"
	"testing"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Where this process may make cgroups (root, a mounted hierarchy with the
// memory controller), a command's memory and processes are bounded by
// them, not by rlimits: Mechanism says so, and the groups go with Remove.
func TestCgroupWhereAvailable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	v1 := "/sys/fs/cgroup/memory/cgroup.procs"
	v2 := "/sys/fs/cgroup/cgroup.controllers"
	if _, err := os.Stat(v1); err != nil {
		if _, err := os.Stat(v2); err != nil {
			t.Skip("no cgroup hierarchy mounted")
		}
	}
	cg := NewCgroup(spec.Limits{Memory: 64 << 20, Pids: 16})
	dirs := []string{cg.v2}
	for _, d := range cg.v1 {
		dirs = append(dirs, d)
	}
	if cg.memory == "" {
		t.Errorf("no memory cgroup as root: %s", Mechanism(cg, spec.Limits{Memory: 64 << 20, Pids: 16}))
	}
	cg.Remove()
	for _, d := range dirs {
		if _, err := os.Stat(d); d != "" && err == nil {
			t.Errorf("%s left behind", d)
		}
	}
}
