// Package command is one sandboxed command on the runtime's side, whatever
// builds its sandbox: the Spec checked and completed with its defaults
// (New), the writable mounts handed to the sandbox uid and measured before
// it runs (Ready), its quotas watched while it runs (WatchQuotas, which
// kills it past one), and after it the sized overlays' upper layers merged
// into their mounts, setuid and setgid bits cleared, sparse giants removed
// and the limit it ran into named (Finish). Supervise runs a started
// process under the policy every runner shares: a session of its own, the
// timeout and cancellation killing its process group, capped output, exit
// statuses mapped, leftovers killed. Every change to a mount goes through
// an os.Root of it (or package hostfs) and never follows a link out.
package command

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// Command is one spec checked and readied for a sandbox: the runtime's side
// of a command before and after it runs, shared by the per-command launch
// (package native) and a live sandbox (package live).
type Command struct {
	Spec     spec.Spec
	Env      []string
	Dir      string
	Mounts   []spec.Mount // checked, parents first
	Limits   spec.Limits  // with defaults
	UID, GID int
	Drop     bool // the runtime is root: commands run as UID
	Outbound bool
	// Sized gives, by mount, the size of the upper layer of a sized
	// overlay (0 none); Ups receives those layers (nil: no sized mount).
	Sized []int64
	Ups   *Uppers
	// windowed says, by mount, that its upper layer is the quota's window
	// (Quota.RefuseNear), smaller than what the quota has left.
	windowed []bool

	quotas *limits.QuotaWatch

	hit struct {
		sync.Mutex
		m      spec.Mount
		why    string
		memory bool   // the measured memory was past the limit
		kill   func() // set once the command runs
	}
	memStop chan struct{} // ends the memory watch (Running, Finish)
}

// New checks sp and fills in what it leaves to defaults.
func New(ctx context.Context, sp spec.Spec) (*Command, error) {
	env, err := spec.Env(sp)
	if err != nil {
		return nil, err
	}
	dir := sp.Dir
	if dir == "" {
		dir = "/tmp"
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: dir %q is not absolute", sp.Dir)
	}
	mounts, err := spec.CheckMounts(sp.Mounts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: not started: %w", err)
	}
	c := &Command{Spec: sp, Env: env, Dir: dir, Mounts: mounts, Limits: sp.Limits.WithDefaults(),
		Outbound: sp.Outbound && !sp.Network}
	c.UID, c.GID, c.Drop = spec.IDs()
	for i, m := range mounts {
		if m.Target == "/workspace" && m.Writable && m.Quota == nil {
			q := c.Limits.Workspace
			q.Name, q.Hint = "workspace_quota", "--workspace-quota / --workspace-files (task budget key workspace_quota)"
			mounts[i].Quota = &q
		}
	}
	return c, nil
}

// Ready gives the writable mounts to the sandbox uid, measures the quotas
// and sizes the overlays of refusing quotas (package native).
func (c *Command) Ready() error {
	start, err := ownMounts(c.Mounts, c.Drop, c.UID, c.GID)
	if err != nil {
		return err
	}
	c.quotas = limits.NewQuotaWatch(c.Mounts, start)
	for i, m := range c.Mounts {
		q := m.Quota
		if !m.Writable || q == nil || q.Bytes <= 0 || !q.Refuse && q.RefuseNear <= 0 {
			continue
		}
		size, windowed := max(q.Bytes-start[i][0], 1), false
		if hasSubmounts(m.Source) {
			return fmt.Errorf("sandbox: the quota of %s (%s) cannot be a hard bound: host mount points lie below %s, which the sized overlay that holds it would not carry; measure it instead (%s: --workspace-share off)",
				m.Target, spec.Human(q.Bytes), m.Source, q.Name)
		}
		if !q.Refuse && size > q.RefuseNear {
			size, windowed = q.RefuseNear, true
		}
		if c.Sized == nil {
			c.Sized, c.windowed = make([]int64, len(c.Mounts)), make([]bool, len(c.Mounts))
		}
		c.Sized[i], c.windowed[i] = size, windowed
	}
	if c.Sized != nil {
		if c.Ups, err = NewUppers(); err != nil {
			return err
		}
	}
	return nil
}

// hasSubmounts says a mount point of the host lies below dir: an overlay of
// dir would not carry it, so a hard quota of a mount holding one is
// refused.
func hasSubmounts(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	esc := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.HasPrefix(esc.Replace(f[4]), strings.TrimSuffix(dir, "/")+"/") {
			return true
		}
	}
	return false
}

// WatchQuotas measures the quota mounts until stop closes and kills the
// command (through the kill set by Running) when one grows past its quota.
func (c *Command) WatchQuotas(stop <-chan struct{}) {
	c.quotas.Run(stop, func(m spec.Mount, why string) {
		c.hit.Lock()
		c.hit.m, c.hit.why = m, why
		k := c.hit.kill
		c.hit.Unlock()
		if k != nil {
			k()
		}
	})
}

// Running sets how to kill the command once it runs. Where no cgroup
// bounds its memory, memRoot is the pid (as the runtime sees it) of the
// process everything of the command runs below: the memory of that tree is
// measured until Finish, and the command killed once it is past the limit
// (limits.MemoryWatch); 0 measures nothing.
func (c *Command) Running(memRoot int, kill func()) {
	c.hit.Lock()
	c.hit.kill = kill
	c.hit.Unlock()
	if memRoot > 0 && c.Limits.Memory > 0 && c.memStop == nil {
		c.memStop = make(chan struct{})
		go limits.MemoryWatch(memRoot, c.Limits.Memory, c.memStop, func() {
			c.hit.Lock()
			c.hit.memory = true
			k := c.hit.kill
			c.hit.Unlock()
			k()
		})
	}
}

// Finish is the runtime's side after the command: it keeps what the command
// wrote to sized overlays, clears setuid bits, names the quota or limit
// (limit, e.g. a cgroup's) the command ran into, and fills in the UID and
// the limits.
func (c *Command) Finish(res spec.Result, err error, limit func() string) (spec.Result, error) {
	if c.memStop != nil {
		close(c.memStop)
	}
	c.hit.Lock()
	m, why, memory := c.hit.m, c.hit.why, c.hit.memory
	c.hit.Unlock()
	full := -1          // the sized mount whose upper layer filled up (or held a sparse giant)
	filled := false     // its upper layer was full, not only too small for a sparse file
	var sparse []string // files too large for their layer, not kept
	if c.Ups != nil {
		for i, up := range c.Ups.Take() {
			skipped, merr := mergeUpper(up, c.Mounts[i].Source)
			if merr != nil && err == nil {
				err = fmt.Errorf("sandbox: keep what the command wrote to %s: %w", c.Mounts[i].Target, merr)
			}
			for _, rel := range skipped {
				sparse = append(sparse, filepath.Join(c.Mounts[i].Target, rel))
			}
			if isFull := upperFull(up); (isFull || len(skipped) > 0) && (full < 0 || isFull && !filled) {
				full, filled = i, isFull
			}
			up.Close()
		}
	}
	end, giants, serr := stripSetid(c.Mounts, c.Limits)
	if serr != nil && err == nil {
		err = serr
	}
	if why == "" {
		m, why = c.quotas.Final(end)
	}
	if full >= 0 {
		m = c.Mounts[full]
		res.Limit = m.Quota.Name
		switch {
		case filled && c.windowed[full]:
			res.QuotaNote = fmt.Sprintf("%s takes at most %s from one command (what a command writes there is held in memory until it ends): writes past it were refused (No space left on device) and what fit is kept; write the rest in further commands (each has the same share, up to the quota of %s)", m.Target, spec.Human(c.Sized[full]), spec.Human(m.Quota.Bytes))
		case filled:
			res.QuotaNote = fmt.Sprintf("%s is full: writes past its quota (%s) were refused (No space left on device) and what fit is kept; delete files there to make room for the next command, or raise it with %s", m.Target, spec.Human(m.Quota.Bytes), m.Quota.Hint)
		default:
			res.QuotaNote = fmt.Sprintf("sparse files larger than the quota of %s (%s) allows were not kept (a file with holes costs its whole size to hash and copy); write only the data you need, or raise it with %s", m.Target, spec.Human(m.Quota.Bytes), m.Quota.Hint)
		}
		if len(sparse) > 0 {
			res.QuotaNote += fmt.Sprintf("; not kept, being larger than the quota allows (sparse): %s", strings.Join(sparse, ", "))
		}
	} else if why != "" {
		res.Limit = m.Quota.Name
		if res.Limit == "" {
			res.Limit = "quota"
		}
		res.QuotaNote = fmt.Sprintf("%s is over its quota (%s); what was written is kept; delete files there to make room, or raise it with %s", m.Target, why, m.Quota.Hint)
	}
	if len(giants) > 0 {
		if res.Limit == "" {
			res.Limit = spec.LimitSparse
		}
		res.QuotaNote = strings.TrimPrefix(res.QuotaNote+"; "+limits.SparseNote(giants), "; ")
	}
	if err == nil && res.Limit == "" {
		res.Limit = limit()
		if res.Limit == "" && memory {
			res.Limit = spec.LimitMemory
		}
		if res.Limit == "" && res.ExitCode == spec.HelperExit && strings.HasPrefix(string(res.Stderr), "apodex sandbox:") {
			res.ExitCode = 1 // a setup failure, as bwrap reports its own
		}
	}
	res.UID, res.Limits = c.UID, c.Limits
	return res, err
}
