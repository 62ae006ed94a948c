package sandbox

import (
	"context"
	"net/netip"
)

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

func (l limited) Run(ctx context.Context, sp Spec) (Result, error) {
	if sp.Limits == (Limits{}) {
		sp.Limits = l.o.Limits
	}
	if sp.Network && l.o.Outbound {
		sp.Network, sp.Outbound = false, true
	}
	if sp.AllowNets == nil {
		sp.AllowNets = l.o.AllowNets
	}
	return l.Runner.Run(ctx, sp)
}

// Unwrap returns the runner WithOptions wrapped.
func Unwrap(r Runner) Runner {
	if l, ok := r.(limited); ok {
		return l.Runner
	}
	return r
}
