package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/sandbox"
)

// NewID is a sortable, unique run id: UTC time and 3 random bytes.
func NewID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func chooseSandbox(kind string, network, hostNetwork bool, allow []netip.Prefix, lim sandbox.Limits) (sandbox.Runner, record.SandboxSettings, *record.Warning) {
	set := record.SandboxSettings{Kind: "bwrap", Network: network}
	if network {
		set.NetworkMode = "outbound"
		if hostNetwork || kind == "none" {
			set.NetworkMode = "host"
		}
	}
	if kind == "none" {
		set.Kind = "none"
		return sandbox.None{}, set, &record.Warning{Code: "no_sandbox", Message: "--sandbox none: shell commands run WITHOUT isolation, with your user's full access to this machine; this run is not trainable"}
	}
	r, err := sandbox.New(kind)
	if err != nil {
		set.Kind = "unavailable"
		return nil, set, &record.Warning{Code: "sandbox_unavailable", Message: err.Error() + "; bash is not offered to the agents"}
	}
	set.Kind = sandbox.KindOf(r)
	if set.Kind == sandbox.KindBwrap {
		set.Version = sandbox.Version()
	}
	eff := sandbox.Effective(lim)
	set.UID, set.MemLimit, set.PidsLimit, set.TmpSize = sandbox.CommandUID(), eff.Memory, eff.Pids, eff.TmpSize
	set.Mechanism = sandbox.Mechanism(lim)
	// One live sandbox per agent's shape of command (sandbox.Reuse) unless
	// APODEX_SANDBOX_REUSE=0.
	set.Reuse = !sandbox.ReuseOff()
	return sandbox.Reuse(sandbox.WithOptions(r, sandbox.Options{Limits: lim, Outbound: network && !hostNetwork, AllowNets: allow})), set, nil
}

// allowNets reads Settings.NetworkAllow (--network-allow): prefixes, only
// with --network (outbound), read again from a record as from the flag.
func allowNets(cfg Settings) ([]netip.Prefix, error) {
	if len(cfg.NetworkAllow) == 0 {
		return nil, nil
	}
	if !cfg.Network || cfg.HostNetwork {
		return nil, &ConfigError{"network_allow (--network-allow) needs --network (outbound; --network host refuses nothing)"}
	}
	var out []netip.Prefix
	for _, v := range cfg.NetworkAllow {
		p, err := netip.ParsePrefix(v)
		if err != nil || p.Masked() != p {
			return nil, &ConfigError{fmt.Sprintf("network_allow %q: not a prefix such as 10.1.2.0/24 or fd00::/64", v)}
		}
		out = append(out, p)
	}
	return out, nil
}

func progress(w io.Writer, lg *slog.Logger) func(agent.Step) {
	if w == nil && (lg == nil || !lg.Enabled(context.Background(), slog.LevelDebug)) {
		return nil
	}
	return func(s agent.Step) {
		if lg != nil {
			lg.Debug("step", "agent", s.Agent, "turn", s.Turn, "tool", s.Tool, "is_error", s.IsError, "args", s.Args, "output", s.Output)
		}
		if w == nil {
			return
		}
		mark := "ok"
		if s.IsError {
			mark = "ERR"
		}
		fmt.Fprintf(w, "[%s] turn %d %s %s -> %s %s\n", s.Agent, s.Turn, s.Tool, s.Args, mark, s.Output)
	}
}

// appendEvent records an event; a failure is recorded as a warning.
func appendEvent(log *record.Log, typ, agent string, payload any) {
	if _, err := log.Append(typ, agent, payload); err != nil {
		log.Append(record.TypeWarning, "", record.Warning{Code: "record", Message: fmt.Sprintf("could not record a %s event: %v", typ, err)})
	}
}

// totals counts the run's turns, tool calls and tokens: the coordinator's
// own turns and calls, plus, in a team, every subagent's from the record.
// Usage is the sum of every model_response in the record — every agent,
// the verifier, summaries and salvage — prompt and completion included, so
// prompt + completion = total. st is the record folded (nil when it could
// not be read: then the coordinator's own figures are all there is).
func totals(st *runstate.Loaded, out agent.Outcome, team bool) (turns, calls int, usage llm.Usage) {
	turns, calls, usage = out.Turns, out.ToolCalls, out.Usage
	if st == nil {
		return
	}
	info := runview.InfoOf(st)
	usage = info.Usage
	if !team {
		return
	}
	for _, a := range info.Agents {
		if a.Agent != "lead" && a.Agent != "main" && !record.RuntimeVerifier(a.Agent) {
			turns += a.Turns
			calls += a.ToolCalls
		}
	}
	return
}
