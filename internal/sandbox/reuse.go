package sandbox

import (
	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/live"
)

// ReuseEnv is the variable that, set to "0", makes Reuse return the per-command runner.
const ReuseEnv = live.ReuseEnv

// ReuseOff reports whether ReuseEnv turns live sandboxes off.
func ReuseOff() bool { return live.ReuseOff() }

// Reuse returns r with live sandboxes when r is Bwrap or Native (also
// under WithOptions), unless ReuseEnv says "0"; other runners as they are.
func Reuse(r Runner) Runner {
	if ReuseOff() {
		return r
	}
	switch b := r.(type) {
	case limited:
		return limited{Reuse(b.Runner), b.o}
	case *Bwrap:
		return live.NewPool(KindBwrap, b.Path, b)
	case Native:
		return live.NewPool(KindNative, "", b)
	}
	return r
}

// Close shuts down the live sandboxes of r, a runner Reuse returned; other
// runners have nothing to close.
func Close(r Runner) error {
	if p, ok := Unwrap(r).(*live.Pool); ok {
		return p.Close()
	}
	return nil
}

// Mechanism says how the limits of a command are enforced, e.g.
// "memory=cgroup-v2 pids=cgroup-v2 pidns ipcns tmp=tmpfs workspace=overlay"
// (limits.Mechanism); it is recorded with the run.
func Mechanism(lim Limits) string {
	cg := limits.NewCgroup(lim.WithDefaults())
	defer cg.Remove()
	return limits.Mechanism(cg, lim.WithDefaults())
}
