package run

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/team"
	"github.com/apodex/apodex/internal/tool/builtin"
	"github.com/apodex/apodex/internal/worktree"
)

// Settings is every setting a run has. It is the recorded type itself
// (record.RunSettings, run_started's "settings"): Execute records a run's
// Settings as they are and Resume and replay read them back as they are,
// so nothing is copied field by field and a new field is recorded by
// being declared.
//
// Where a run's settings come from, each layer overriding the one before:
// Defaults; the configuration files' top-level keys, then the selected
// profile's (internal/config); the environment variables of those keys;
// the task file's budget keys; the command-line flags.
type Settings = record.RunSettings

// Defaults are the settings of a run nobody configured: the one place the
// runtime's defaults are written (the flags of apodex run show them, eval's
// rollouts start from them).
func Defaults() Settings {
	return Settings{
		Mode: ModeReact,
		Team: record.TeamSettings{
			Concurrency: team.DefaultConcurrency,
			Isolation:   team.PerAgent,
			SubBudget:   record.BudgetSettings{MaxTurns: team.DefaultSubMaxTurns, MaxToolCalls: 100},
			MergeIgnore: slices.Clone(worktree.DefaultIgnore),
			// The verifier's, the effort waves' and the writer's settings.
			VerifyMaxTurns: team.DefaultVerifyMaxTurns,
			Effort:         EffortAdaptive,
			EffortWidth:    team.DefaultEffortWidth,
			EffortWaves:    team.DefaultEffortWaves,
			EffortBudget:   team.DefaultEffortBudget,
			Synthesis:      SynthesisOn,
		},
		Budget: record.BudgetSettings{MaxTurns: 50, MaxToolCalls: 200, MaxTokens: 2_000_000},
		// Window 0: the model's own window (llm.ContextWindow), chosen when
		// the run starts.
		Context:        record.ContextSettings{At: 0.8, To: 0.5, KeepRecent: 2, KeepTail: 6},
		Sandbox:        sandbox.KindAuto,
		CommandTimeout: record.Duration(builtin.DefaultBashTimeout),
		ScratchQuota:   publish.DefaultScratchQuota,
		MaxAttempts:    6,
		Limits: record.LimitSettings{MemLimit: sandbox.DefaultMemory, PidsLimit: sandbox.DefaultPids, TmpSize: sandbox.DefaultTmpSize,
			WorkspaceQuota: sandbox.DefaultWorkspaceBytes, WorkspaceFiles: sandbox.DefaultWorkspaceFiles, WorkspaceShare: sandbox.DefaultWorkspaceRefuseNear},
	}
}

// BudgetLimits are l with the sandbox limits a task's budget asks for,
// as evaluation applies them to a world's rollouts (apodex run lets its
// flags win, package runflags): a workspace quota asked for is a hard
// bound, one command adding at most sandbox.DefaultWorkspaceShare.
func BudgetLimits(l record.LimitSettings, b contract.Budget) record.LimitSettings {
	l.MemLimit = cmp.Or(b.MemLimit, l.MemLimit)
	l.PidsLimit = cmp.Or(b.PidsLimit, l.PidsLimit)
	l.TmpSize = cmp.Or(b.TmpSize, l.TmpSize)
	if b.WorkspaceQuota > 0 {
		l.WorkspaceQuota, l.WorkspaceShare = b.WorkspaceQuota, sandbox.DefaultWorkspaceShare
	}
	return l
}

// Values of Settings.Team.Synthesis.
const (
	SynthesisOn  = "on"
	SynthesisOff = "off"
)

// Values of Settings.Team.Effort.
const (
	EffortAdaptive = team.EffortAdaptive
	EffortOff      = team.EffortOff
)

// SettingsFrom reads recorded settings back: as they are, or the zero
// Settings for a record that has none.
func SettingsFrom(r *record.RunSettings) Settings {
	if r == nil {
		return Settings{}
	}
	return *r
}

// The conversions below are where the recorded types meet the packages
// that take them; the struct conversions fail to compile when a field is
// added on one side only.

func budgetOf(b record.BudgetSettings) agent.Budget    { return agent.Budget(b) }
func contextOf(c record.ContextSettings) agent.Context { return agent.Context(c) }
func durationOf(d record.Duration) time.Duration       { return time.Duration(d) }
func retryOf(s Settings) llm.RetryPolicy               { return llm.RetryPolicy{MaxAttempts: s.MaxAttempts} }
func limitsOf(l record.LimitSettings) sandbox.Limits {
	return sandbox.Limits{Memory: l.MemLimit, Pids: l.PidsLimit, TmpSize: l.TmpSize,
		Workspace: sandbox.Quota{Bytes: l.WorkspaceQuota, Files: l.WorkspaceFiles, RefuseNear: l.WorkspaceShare}}
}

// Recorded is what the record says a run was started with.
type Recorded struct {
	Started  record.RunStarted
	Settings Settings
	At       time.Time
}

// ReadStarted reads a run's run_started event.
func ReadStarted(dir string) (Recorded, error) {
	first, err := record.First(dir)
	if err != nil {
		return Recorded{}, err
	}
	p, err := record.DecodePayload(first)
	rs, ok := p.(*record.RunStarted)
	if !ok && (err == nil || errors.Is(err, record.ErrUnknownType)) {
		err = errors.New("run: the record does not start with run_started")
	}
	if err != nil {
		return Recorded{}, err
	}
	r := Recorded{Started: *rs}
	r.At = first.Time
	r.Settings = SettingsFrom(r.Started.Settings)
	return r, nil
}

// SandboxFor is the sandbox a resume or a replay of a recorded run runs
// its commands in. A record is input from outside, so the kind comes from
// what the run was isolated with (run_started.sandbox.kind), which must
// agree with what it asked for (run_started.settings.sandbox), and the
// network the settings give commands must agree with the sandbox's; a
// disagreement is refused, naming both. A run recorded without isolation
// is run without it only when the user asks for that: asked is the
// user's --sandbox, "" (the recorded kind) or "none" (no isolation,
// whatever the record says).
func SandboxFor(rs record.RunStarted, asked string) (string, error) {
	switch asked {
	case "":
	case sandbox.KindNone:
		return sandbox.KindNone, nil
	default:
		return "", &ConfigError{fmt.Sprintf("--sandbox %q: the only value is none (otherwise the run's recorded sandbox is used)", asked)}
	}
	id, kind := rs.RunID, rs.Sandbox.Kind
	if rs.Settings != nil { // a record from before settings were recorded has nothing to contradict
		if err := contradiction(rs); err != nil {
			return "", err
		}
	}
	switch kind {
	case sandbox.KindBwrap, sandbox.KindNative:
		return kind, nil
	case "unavailable": // none could be had then: the one asked for, if it can be had now
		return cmp.Or(SettingsFrom(rs.Settings).Sandbox, sandbox.KindAuto), nil
	case sandbox.KindNone:
		return "", &ConfigError{fmt.Sprintf("run %s ran without a sandbox; running it again would run its commands on this machine unisolated: pass --sandbox none to accept that", id)}
	}
	return "", &ConfigError{fmt.Sprintf("run %s: run_started.sandbox.kind is %q, not a sandbox this version knows; pass --sandbox none to run it without isolation anyway", id, kind)}
}

// NetworkAllowFor checks a recorded allow-list against the user's: the
// prefixes a recorded run let its outbound sandbox reach although they are
// private or link-local (settings.network_allow) are a grant the record
// alone cannot make (a rechained edit could add the metadata range), so a
// resume or a replay runs with them only when the user gives each again
// (--network-allow). given without a recorded list is refused too: the
// run would not use it.
func NetworkAllowFor(rs record.RunStarted, given []string) error {
	recorded := SettingsFrom(rs.Settings).NetworkAllow
	if len(recorded) == 0 {
		if len(given) > 0 {
			return &ConfigError{fmt.Sprintf("--network-allow: run %s recorded no network_allow; it runs with the network it recorded", rs.RunID)}
		}
		return nil
	}
	norm := func(v string) string {
		if p, err := netip.ParsePrefix(v); err == nil {
			return p.Masked().String()
		}
		return v
	}
	have := map[string]bool{}
	for _, v := range given {
		have[norm(v)] = true
	}
	var missing []string
	for _, v := range recorded {
		if !have[norm(v)] {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		return &ConfigError{fmt.Sprintf("run %s lets its sandboxed commands reach %s (run_started.settings.network_allow); a record is input from outside, so that is not taken from it: pass --network-allow %s to run it so",
			rs.RunID, strings.Join(recorded, ", "), strings.Join(recorded, ","))}
	}
	return nil
}

// contradiction is where a record's settings disagree with the sandbox it
// says the run had, on the kind or on the network; nil when they agree.
func contradiction(rs record.RunStarted) error {
	sb, set := rs.Sandbox, SettingsFrom(rs.Settings)
	disagree := func(a, av, b, bv string) error {
		return &ConfigError{fmt.Sprintf("run %s: the record contradicts itself: run_started.%s is %s but run_started.%s is %s; it was changed after the run, so it is not run: check the run directory, or pass --sandbox none to run it without isolation anyway", rs.RunID, a, av, b, bv)}
	}
	switch {
	case !agrees(sb.Kind, set.Sandbox):
		return disagree("sandbox.kind", quoted(sb.Kind), "settings.sandbox", quoted(set.Sandbox))
	case sb.Network != set.Network:
		return disagree("sandbox.network", fmt.Sprint(sb.Network), "settings.network", fmt.Sprint(set.Network))
	case sb.Network && sb.NetworkMode != "" && (sb.NetworkMode == "host") != (set.HostNetwork || sb.Kind == sandbox.KindNone):
		return disagree("sandbox.network_mode", quoted(sb.NetworkMode), "settings.host_network", fmt.Sprint(set.HostNetwork))
	}
	// The limits the sandbox recorded are the settings' with defaults
	// (zero: not recorded, as for a run without a sandbox).
	eff := sandbox.Effective(limitsOf(set.Limits))
	if set.Limits == (record.LimitSettings{}) { // a record from before the settings held limits
		return nil
	}
	for _, l := range []struct {
		name     string
		sb, want int64
	}{{"mem_limit", sb.MemLimit, eff.Memory}, {"pids_limit", sb.PidsLimit, eff.Pids}, {"tmp_size", sb.TmpSize, eff.TmpSize}} {
		if l.sb != 0 && l.sb != l.want {
			return disagree("sandbox."+l.name, fmt.Sprint(l.sb), "settings.limits."+l.name, fmt.Sprintf("%d (in effect)", l.want))
		}
	}
	return nil
}

// agrees says whether a recorded sandbox kind is one the recorded ask
// could have given.
func agrees(kind, asked string) bool {
	switch asked {
	case "", sandbox.KindAuto:
		return kind == sandbox.KindBwrap || kind == sandbox.KindNative || kind == "unavailable"
	case sandbox.KindBwrap, sandbox.KindNative:
		return kind == asked || kind == "unavailable"
	case sandbox.KindNone:
		return kind == sandbox.KindNone
	}
	return false
}

func quoted(s string) string { return fmt.Sprintf("%q", s) }
