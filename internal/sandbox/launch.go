package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/etccopy"

	"github.com/apodex/apodex/internal/watch"
)

// SandboxUID and SandboxGID are the host ids sandboxed commands run as when
// the runtime runs as root (nobody/nogroup): never host uid 0. A runtime
// that is not root runs commands as itself.
const (
	SandboxUID = 65534
	SandboxGID = 65534
)

// ids returns the host uid/gid commands run as, and whether the runtime must
// switch to them (it is root).
func ids() (uid, gid int, drop bool) {
	if os.Geteuid() == 0 {
		return SandboxUID, SandboxGID, true
	}
	return os.Geteuid(), os.Getegid(), false
}

// Mechanism says how the limits of a command are enforced, e.g.
// "memory=cgroup-v1 pids=cgroup-v1 tmp=tmpfs"; it is recorded with the run.
func Mechanism(lim Limits) string {
	cg := newCgroup(lim.withDefaults())
	defer cg.remove()
	return mechanism(cg, lim.withDefaults())
}

func mechanism(cg *cgroup, lim Limits) string {
	mem, pids := cg.memory, cg.pids
	if mem == "" && lim.Memory > 0 {
		mem = "rlimit-as"
	}
	if pids == "" && lim.Pids > 0 {
		pids = "rlimit-nproc"
		if _, _, drop := ids(); !drop && !nprocPerUserns() {
			pids = "none"
		}
	}
	if mem == "" {
		mem = "none"
	}
	if pids == "" {
		pids = "none"
	}
	return fmt.Sprintf("memory=%s pids=%s tmp=tmpfs", mem, pids)
}

// nprocPerUserns says RLIMIT_NPROC counts the processes of a uid in one
// user namespace (Linux 5.14 and later): a runtime that is not root can
// then bound a sandbox's processes with it, its own user namespace being
// the sandbox's, without counting the user's processes outside it. Before,
// it counted every process of the uid on the host.
var nprocPerUserns = sync.OnceValue(func() bool {
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
	var major, minor int
	if _, err := fmt.Sscanf(string(rel), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 14
})

// launch runs spec through the helper (helper_linux.go) with the given
// backend and returns its result.
func launch(ctx context.Context, backend, bwrap string, spec Spec) (Result, error) {
	c, err := newCommand(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return Result{ExitCode: -1}, err
		}
		return Result{}, err
	}
	exe, err := selfExe()
	if err != nil {
		return Result{}, err
	}
	etc, err := etccopy.Host.Acquire()
	if err != nil {
		return Result{}, err
	}
	defer etccopy.Host.Release(etc) // the copy must outlive the sandbox

	uid, gid, drop := c.uid, c.gid, c.drop
	outbound, lim := c.outbound, c.lim
	if err := c.ready(); err != nil {
		return Result{}, err
	}
	p := plan{Backend: backend, Bwrap: bwrap, UID: uid, GID: gid, Drop: drop, Etc: etc.Dir(),
		Spec: c.specPlan(spec.Network), Landlock: backend == "native"}
	cg := newCgroup(lim)
	defer cg.remove()
	p.Rlimits = c.rlimits(cg)

	planR, planW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer planR.Close()
	defer planW.Close()
	cmd := exec.Command(exe)
	cmd.Args = []string{"apodex-sandbox"}
	cmd.Env = []string{helperEnv + "=1"}
	cmd.ExtraFiles = []*os.File{planR}
	if c.ups != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, c.ups.theirs) // fd 4: upperFD
	}
	var ob *outboundNet
	if outbound {
		if ob, err = newOutbound(drop, outboundRules(etc.Dir(), spec.AllowNets)); err != nil {
			return Result{}, err
		}
		defer ob.close()
		p.Net = ob.rules
	}
	cmd.SysProcAttr = helperAttr(backend, spec.Network, outbound, ob.joined(), drop, uid, gid, cg)
	if backend == "bwrap" && outbound {
		p.Spec.Network = true // bwrap shares the helper's namespace
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return Result{}, err
	}
	stopWatch := make(chan struct{})
	go c.watchQuotas(stopWatch)
	res, err := supervise(ctx, cmd, spec, &hooks{
		start: ob.start,
		started: func(pid int) error {
			c.running(func() { killGroup(pid); cg.kill() })
			planR.Close()
			if err := cg.join(pid); err != nil {
				return err
			}
			if err := ob.started(pid); err != nil {
				return err
			}
			_, err := planW.Write(raw) // the plan is small: fits the pipe
			planW.Close()
			return err
		},
		kill: cg.kill,
	})
	close(stopWatch)
	res, err = c.finish(res, err, cg.hit)
	res.Mechanism = mechanism(cg, lim)
	return res, err
}

// helperAttr is how the helper (or a live sandbox's server) of backend is
// started: its namespaces, uid maps, cgroup, parent-death signal and a
// session of its own (no controlling terminal, see supervise).
// network shares the host's network, outbound gives the helper a network
// namespace of its own for pasta, unless joined: it starts in one made
// apart (netns_linux.go).
func helperAttr(backend string, network, outbound, joined, drop bool, uid, gid int, cg *cgroup) *syscall.SysProcAttr {
	outbound = outbound && !joined
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	if cg.v2 != "" {
		attr.UseCgroupFD, attr.CgroupFD = true, cg.v2fd
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

// ownMounts gives the writable mounts' contents to the sandbox uid when
// give is set, so the command can change what the runtime wrote there (the
// runtime, root, keeps full access); only entries not already owned are
// changed. The same walk measures the mounts that have a quota. Every change
// goes through an os.Root of the mount, so a concurrent command swapping a
// directory for a link cannot point it at a host file; links themselves are
// not followed.
func ownMounts(ms []Mount, give bool, uid, gid int) (tally, error) {
	settled := func(e watch.Entry) bool {
		return e.Mode&(fs.ModeSetuid|fs.ModeSetgid) == 0 && (!give || int(e.UID) == uid && int(e.GID) == gid)
	}
	return eachEntry(ms, give, func(root *os.Root, rel string, fi fs.FileInfo) error {
		return giveTo(root, rel, fi, give, uid, gid)
	}, tend(give, uid, gid), settled)
}

func giveTo(root *os.Root, rel string, fi fs.FileInfo, give bool, uid, gid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !give || !ok || (int(st.Uid) == uid && int(st.Gid) == gid) {
		return nil
	}
	// A file the runtime is replacing right now (a parallel file tool
	// call) may be gone: nothing to give.
	if err := root.Lchown(rel, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: give %s to the sandbox uid %d: %w", filepath.Join(root.Name(), rel), uid, err)
	}
	return nil
}

// tend is what is done to an entry of a watched mount that changed since
// the last command (before or after one): it is given to the sandbox uid
// and loses any setuid/setgid bit.
func tend(give bool, uid, gid int) func(root *os.Root, rel string, fi fs.FileInfo) error {
	return func(root *os.Root, rel string, fi fs.FileInfo) error {
		if err := clearSetid(root, rel, fi); err != nil {
			return err
		}
		return giveTo(root, rel, fi, give, uid, gid)
	}
}

// stripSetid clears setuid and setgid bits on everything in the writable
// mounts after a command (chmod works on a nosuid mount; the bits must not
// outlive the sandbox in the run directory), removes sparse giants
// (sparse.go, returned) and measures the mounts that have a quota. Links are skipped; the chmod resolves inside the mount only.
func stripSetid(ms []Mount, lim Limits) (tally, []string, error) {
	uid, gid, give := ids()
	var sparse []string
	t, err := eachEntry(ms, true, sparseSweep(ms, lim, &sparse, clearSetid), sparseSweep(ms, lim, &sparse, tend(give, uid, gid)), nil)
	return t, sparse, err
}

func clearSetid(root *os.Root, rel string, fi fs.FileInfo) error {
	m := fi.Mode()
	if m&fs.ModeSymlink != 0 || m&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
		return nil
	}
	if err := root.Chmod(rel, m.Perm()|(m&fs.ModeSticky)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: clear setuid/setgid on %s: %w", filepath.Join(root.Name(), rel), err)
	}
	return nil
}

// tally is what eachEntry measured of the mounts with a quota, by index:
// bytes (as the quota counts them) and entries.
type tally map[int][2]int64

// eachEntry calls f on every entry of the writable mounts (the mount's own
// directory included, as "."), all of them when every is set, else only
// those with a quota, through an os.Root of the mount, and measures the
// mounts with a quota on the way. It returns the first error of f.
//
// A watched mount (Watch set) is not walked: tracked is called on the entries that
// changed since the last call for it (whatever every says), and its tally
// comes from its tree's running totals.
//
// settled (nil: none) tells an entry of a watched mount that needs
// nothing from its stat as of the sync: it is not looked at again.
func eachEntry(ms []Mount, every bool, f, tracked func(root *os.Root, rel string, fi fs.FileInfo) error, settled func(watch.Entry) bool) (tally, error) {
	var first error
	t := tally{}
	for i, m := range ms {
		q := m.Quota
		if !m.Writable || (!every && q == nil && m.Watch == nil) {
			continue
		}
		root, err := os.OpenRoot(m.Source)
		if err != nil {
			return t, fmt.Errorf("sandbox: open mount %s: %w", m.Source, err)
		}
		if m.Watch != nil {
			err := eachChanged(root, m.Watch, m.Source, tracked, settled)
			root.Close()
			if err != nil && first == nil {
				first = err
			}
			if q != nil {
				b, f := usageOf(m)
				t[i] = [2]int64{b, f}
			}
			continue
		}
		var bytes, files int64
		// Discovery by path (fast; it never follows links); every change
		// goes through root.
		_ = filepath.WalkDir(m.Source, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, err := filepath.Rel(m.Source, p)
			if err != nil {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			if rel != "." && q != nil {
				files++
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && !q.Apparent {
					bytes += st.Blocks * 512
				} else if q.Apparent && fi.Mode().IsRegular() {
					bytes += fi.Size()
				}
			}
			if err := f(root, rel, fi); err != nil && first == nil {
				first = err
			}
			return nil
		})
		root.Close()
		if q != nil {
			t[i] = [2]int64{bytes, files}
		}
	}
	return t, first
}

// eachChanged calls f on every entry of the dir watched in set that
// changed since the last call for it (all of them the first time).
func eachChanged(root *os.Root, set *watch.Set, dir string, f func(root *os.Root, rel string, fi fs.FileInfo) error, settled func(watch.Entry) bool) error {
	tr, err := set.For(dir)
	if err != nil {
		return fmt.Errorf("sandbox: watch mount %s: %w", dir, err)
	}
	var first error
	for _, rel := range tr.Shared("sandbox").Take() {
		// An entry the sync just saw owned by the sandbox uid and without
		// setuid/setgid (a world's file through its idmapped lower layer)
		// needs nothing: no lstat of each of a large world's files.
		if e, ok := tr.Entry(rel); ok && settled != nil && settled(e) {
			continue
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			continue // gone again
		}
		if err := f(root, rel, fi); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CommandUID is the host uid sandboxed commands run as in this process.
func CommandUID() int { uid, _, _ := ids(); return uid }

// Effective returns lim with the defaults filled in.
func Effective(lim Limits) Limits { return lim.withDefaults() }
