package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// command is one spec checked and readied for a sandbox: the runtime's side
// of a command before and after it runs, shared by the per-command launch
// (launch.go) and a live sandbox (reuse.go).
type command struct {
	spec     Spec
	env      []string
	dir      string
	mounts   []Mount // checked, parents first
	lim      Limits  // with defaults
	uid, gid int
	drop     bool // the runtime is root: commands run as uid
	outbound bool

	quotas *quotaWatch
	sized  []int64 // by mount: the upper layer of a sized overlay, 0 none
	ups    *uppers

	hit struct {
		sync.Mutex
		m    Mount
		why  string
		kill func() // set once the command runs
	}
}

// newCommand checks spec and fills in what it leaves to defaults.
func newCommand(ctx context.Context, spec Spec) (*command, error) {
	env, err := envOf(spec)
	if err != nil {
		return nil, err
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/tmp"
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: dir %q is not absolute", spec.Dir)
	}
	mounts, err := checkMounts(spec.Mounts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: not started: %w", err)
	}
	c := &command{spec: spec, env: env, dir: dir, mounts: mounts, lim: spec.Limits.withDefaults(),
		outbound: spec.Outbound && !spec.Network}
	c.uid, c.gid, c.drop = ids()
	for i, m := range mounts {
		if m.Target == "/workspace" && m.Writable && m.Quota == nil {
			q := c.lim.Workspace
			q.Name, q.Hint = "workspace_quota", "--workspace-quota / --workspace-files (task budget key workspace_quota)"
			mounts[i].Quota = &q
		}
	}
	return c, nil
}

// ready gives the writable mounts to the sandbox uid, measures the quotas
// and sizes the overlays of refusing quotas (overlay_linux.go).
func (c *command) ready() error {
	start, err := ownMounts(c.mounts, c.drop, c.uid, c.gid)
	if err != nil {
		return err
	}
	c.quotas = newQuotaWatch(c.mounts, start)
	for i, m := range c.mounts {
		if q := m.Quota; m.Writable && q != nil && q.Refuse && q.Bytes > 0 {
			if c.sized == nil {
				c.sized = make([]int64, len(c.mounts))
			}
			c.sized[i] = max(q.Bytes-start[i][0], 1)
		}
	}
	if c.sized != nil {
		if c.ups, err = newUppers(); err != nil {
			return err
		}
	}
	return nil
}

// specPlan is what the helper needs of the command, with the mounts'
// sources as given.
func (c *command) specPlan(network bool) specPlan {
	return specPlan{Command: c.spec.Command, Dir: c.dir, Mounts: c.mounts, Env: c.env, Network: network, TmpSize: c.lim.TmpSize, Sized: c.sized, NoTrace: c.spec.NoTrace}
}

// rlimits are the limits a cgroup cannot enforce here.
func (c *command) rlimits(cg *cgroup) []rlim {
	var out []rlim
	if cg.memory == "" && c.lim.Memory > 0 {
		out = append(out, rlim{Resource: syscall.RLIMIT_AS, Value: uint64(c.lim.Memory)})
	}
	if cg.pids == "" && c.lim.Pids > 0 && (c.drop || nprocPerUserns()) {
		const rlimitNproc = 6
		out = append(out, rlim{Resource: rlimitNproc, Value: uint64(c.lim.Pids)})
	}
	return out
}

// watchQuotas measures the quota mounts until stop closes and kills the
// command (through the kill set by running) when one grows past its quota.
func (c *command) watchQuotas(stop <-chan struct{}) {
	c.quotas.run(stop, func(m Mount, why string) {
		c.hit.Lock()
		c.hit.m, c.hit.why = m, why
		k := c.hit.kill
		c.hit.Unlock()
		if k != nil {
			k()
		}
	})
}

// running sets how to kill the command once it runs.
func (c *command) running(kill func()) {
	c.hit.Lock()
	c.hit.kill = kill
	c.hit.Unlock()
}

// finish is the runtime's side after the command: it keeps what the command
// wrote to sized overlays, clears setuid bits, names the quota or limit
// (limit, e.g. a cgroup's) the command ran into, and fills in the UID and
// the limits.
func (c *command) finish(res Result, err error, limit func() string) (Result, error) {
	c.hit.Lock()
	m, why := c.hit.m, c.hit.why
	c.hit.Unlock()
	full := -1          // the sized mount whose upper layer filled up
	var sparse []string // files too large for their layer, not kept
	if c.ups != nil {
		for i, up := range c.ups.take() {
			skipped, merr := mergeUpper(up, c.mounts[i].Source)
			if merr != nil && err == nil {
				err = fmt.Errorf("sandbox: keep what the command wrote to %s: %w", c.mounts[i].Target, merr)
			}
			for _, rel := range skipped {
				sparse = append(sparse, filepath.Join(c.mounts[i].Target, rel))
			}
			if (upperFull(up) || len(skipped) > 0) && full < 0 {
				full = i
			}
			up.Close()
		}
	}
	end, giants, serr := stripSetid(c.mounts, c.lim)
	if serr != nil && err == nil {
		err = serr
	}
	if why == "" {
		m, why = c.quotas.final(end)
	}
	if full >= 0 {
		m = c.mounts[full]
		res.Limit = m.Quota.Name
		res.QuotaNote = fmt.Sprintf("%s is full: writes past its quota (%s) were refused (No space left on device) and what fit is kept; delete files there to make room for the next command, or raise it with %s", m.Target, human(m.Quota.Bytes), m.Quota.Hint)
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
			res.Limit = LimitSparse
		}
		res.QuotaNote = strings.TrimPrefix(res.QuotaNote+"; "+sparseNote(giants), "; ")
	}
	if err == nil && res.Limit == "" {
		res.Limit = limit()
		if res.Limit == "" && res.ExitCode == helperExit && strings.HasPrefix(string(res.Stderr), "apodex sandbox:") {
			res.ExitCode = 1 // a setup failure, as bwrap reports its own
		}
	}
	res.UID, res.Limits = c.uid, c.lim
	return res, err
}
