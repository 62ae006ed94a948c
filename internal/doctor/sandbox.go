package doctor

import (
	"os"
	"os/exec"
	"strings"

	"github.com/apodex/apodex/internal/sandbox"
)

// SandboxChecks checks the bubblewrap backend and what a native backend
// needs (user and mount namespaces, Landlock, cgroups).
func SandboxChecks() []Check {
	out := []Check{bwrapCheck()}
	return append(out, nativeChecks()...)
}

func bwrapCheck() Check {
	c := Check{Group: "sandbox", Name: "bwrap"}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		if _, nerr := sandbox.New(sandbox.KindNative); nerr == nil {
			c.Status, c.Detail = Warn, "bubblewrap is not installed: --sandbox auto uses the native sandbox (namespaces + Landlock)"
			c.Fix = "nothing is needed; install bubblewrap (apt-get install -y bubblewrap) to use it instead"
			return c
		}
		c.Status, c.Detail = Fail, "bubblewrap is not installed and the native sandbox is unavailable"
		c.Fix = "install it (Debian/Ubuntu: apt-get install -y bubblewrap), or allow user namespaces for the native sandbox; until then runs need --sandbox none, which does not isolate commands"
		return c
	}
	if err := sandbox.Available(); err != nil {
		c.Status, c.Detail = Fail, path+" is installed but cannot build a sandbox: "+oneLine(err.Error())
		c.Fix = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0), or run in a container started with --privileged / a seccomp profile that allows clone(CLONE_NEWUSER)"
		return c
	}
	c.Status, c.Detail = OK, path+" works ("+strings.TrimSpace(sandbox.Version())+")"
	return c
}

// cgroupCheck says which cgroup hierarchy is mounted and its controllers.
func cgroupCheck() Check {
	c := Check{Group: "sandbox", Name: "cgroups"}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		ctl := strings.Fields(string(b))
		c.Status, c.Detail = OK, "v2, controllers: "+strings.Join(ctl, " ")
		for _, want := range []string{"memory", "pids"} {
			if !contains(ctl, want) {
				c.Status, c.Detail = Warn, "v2 without the "+want+" controller: memory and process limits cannot be enforced"
				c.Fix = "enable it in the parent's cgroup.subtree_control (or run under systemd with Delegate=yes)"
			}
		}
		return c
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		c.Status, c.Detail = Warn, "v1 (legacy hierarchy): limits work only where the memory and pids hierarchies are writable"
		c.Fix = "boot with systemd.unified_cgroup_hierarchy=1 for cgroups v2"
		return c
	}
	c.Status, c.Detail, c.Fix = Warn, "no cgroup filesystem under /sys/fs/cgroup", "mount cgroup2 at /sys/fs/cgroup for memory and process limits"
	return c
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
