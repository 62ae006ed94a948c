// Package native is the sandbox the runtime builds itself, and the helper
// process every per-command sandbox starts with. Launch re-executes the
// running binary as the helper (helper_linux.go; any program importing this
// package serves as it through its init) in its cgroups, namespaces and
// outbound network, hands it the plan, and supervises it. The helper sets
// the rlimits and then either stages the mounts and execs bubblewrap
// (package bwrap) as the sandbox uid, or builds the native sandbox: a
// pivoted read-only root of the system directories, the private /etc, the
// mounts (nosuid, nodev), /proc with its knobs read-only, a minimal /dev
// and a sized /tmp; no capabilities; Landlock (landlock_linux.go) allowing
// writes only in the writable mounts, /tmp and /dev/shm; and the seccomp
// filter (seccomp_linux.go) every sandboxed command runs under. A writable
// mount with a refusing quota becomes an overlay with a sized upper layer
// (overlay_linux.go). The building blocks are exported for a live
// sandbox's server (package live/server), which builds the same sandbox
// once per shape.
package native

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/command"
	"github.com/apodex/apodex/internal/sandbox/etccopy"
	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/netns"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Launch runs sp through the helper (helper_linux.go) with the given
// backend and returns its result.
func Launch(ctx context.Context, backend, bwrapPath string, sp spec.Spec) (spec.Result, error) {
	c, err := command.New(ctx, sp)
	if err != nil {
		if ctx.Err() != nil {
			return spec.Result{ExitCode: -1}, err
		}
		return spec.Result{}, err
	}
	exe, err := spec.SelfExe()
	if err != nil {
		return spec.Result{}, err
	}
	etc, err := etccopy.Host.Acquire()
	if err != nil {
		return spec.Result{}, err
	}
	defer etccopy.Host.Release(etc) // the copy must outlive the sandbox

	uid, gid, drop := c.UID, c.GID, c.Drop
	outbound, lim := c.Outbound, c.Limits
	if err := c.Ready(); err != nil {
		return spec.Result{}, err
	}
	p := plan{Backend: backend, Bwrap: bwrapPath, UID: uid, GID: gid, Drop: drop, Etc: etc.Dir(),
		Spec: PlanOf(c, sp.Network), Landlock: backend == "native"}
	cg := limits.NewCgroup(lim)
	defer cg.Remove()
	p.Rlimits = limits.Rlimits(cg, lim, drop)

	planR, planW, err := os.Pipe()
	if err != nil {
		return spec.Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer planR.Close()
	defer planW.Close()
	cmd := exec.Command(exe)
	cmd.Args = []string{"apodex-sandbox"}
	cmd.Env = []string{helperEnv + "=1"}
	cmd.ExtraFiles = []*os.File{planR}
	if c.Ups != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, c.Ups.Theirs()) // fd 4: upperFD
	}
	var ob *netns.Outbound
	if outbound {
		if ob, err = netns.NewOutbound(drop, netns.OutboundRules(etc.Dir(), sp.AllowNets)); err != nil {
			return spec.Result{}, err
		}
		defer ob.Close()
		p.Net = ob.Rules()
	}
	cmd.SysProcAttr = HelperAttr(backend, sp.Network, outbound, ob.Joined(), drop, uid, gid, cg)
	if backend == "bwrap" && outbound {
		p.Spec.Network = true // bwrap shares the helper's namespace
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return spec.Result{}, err
	}
	stopWatch := make(chan struct{})
	go c.WatchQuotas(stopWatch)
	res, err := command.Supervise(ctx, cmd, sp, &command.Hooks{
		Start: ob.Start,
		Started: func(pid int) error {
			memRoot := pid // no cgroup bounds memory: measure the helper's tree
			if cg.BoundsMemory() {
				memRoot = 0
			}
			c.Running(memRoot, func() { command.KillGroup(pid); cg.Kill() })
			planR.Close()
			if err := cg.Join(pid); err != nil {
				return err
			}
			if err := ob.Started(pid); err != nil {
				return err
			}
			_, err := planW.Write(raw) // the plan is small: fits the pipe
			planW.Close()
			return err
		},
		Kill: cg.Kill,
	})
	close(stopWatch)
	res, err = c.Finish(res, err, cg.Hit)
	res.Mechanism = limits.Mechanism(cg, lim)
	return res, err
}

// HelperAttr is how the helper (or a live sandbox's server) of backend is
// started: its namespaces, uid maps, cgroup, parent-death signal and a
// session of its own (no controlling terminal, see supervise).
// network shares the host's network, outbound gives the helper a network
// namespace of its own for pasta, unless joined: it starts in one made
// apart (netns_linux.go).
func HelperAttr(backend string, network, outbound, joined, drop bool, uid, gid int, cg *limits.Cgroup) *syscall.SysProcAttr {
	outbound = outbound && !joined
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	if fd, ok := cg.V2FD(); ok {
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
	switch {
	case backend == "bwrap" && drop:
		// bwrap runs as pid 1 of its own pid namespace: if it dies (the
		// runtime died and the parent-death signal fired) the kernel kills
		// everything below it, even a child bwrap had not yet told to die
		// with it.
		attr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID
		if outbound {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
	case backend == "bwrap":
		// Not root: the helper gets a user namespace of its own (the
		// runtime's uid as 0) so it can be pid 1 of a pid namespace, as
		// above, and own the network namespace pasta wires out.
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		if outbound {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
	case backend == "native":
		attr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if !network && !joined {
			attr.Cloneflags |= syscall.CLONE_NEWNET
		}
		// A new user namespace: for a root runtime an identity map (the
		// helper can still read 0700 directories on the way to the mounts;
		// the command switches to the sandbox uid), else the runtime's uid
		// as 0.
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		if drop {
			all := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
			attr.UidMappings, attr.GidMappings, attr.GidMappingsEnableSetgroups = all, all, true
		} else {
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		}
	}
	return attr
}

// PlanOf is what the helper (or a live sandbox's server) needs of c, with
// the mounts' sources as given.
func PlanOf(c *command.Command, network bool) SpecPlan {
	return SpecPlan{Command: c.Spec.Command, Dir: c.Dir, Mounts: c.Mounts, Env: c.Env, Network: network, TmpSize: c.Limits.TmpSize, Sized: c.Sized, NoTrace: c.Spec.NoTrace}
}
