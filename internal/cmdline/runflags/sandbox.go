package runflags

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox/spec"
)

// registerLimits registers the per-command sandbox limits, bound into l;
// *asked is set when --workspace-quota is given (on the command line or by
// the configuration).
func registerLimits(fs *cmdline.FlagSet, l *record.LimitSettings, d record.LimitSettings, asked *bool) {
	cmdline.SizeFlag(fs, &l.MemLimit, "mem-limit", d.MemLimit, "memory of one sandboxed command, e.g. 256MiB")
	fs.Int64Var(&l.PidsLimit, "pids-limit", d.PidsLimit, "processes and threads of one sandboxed command")
	cmdline.SizeFlag(fs, &l.TmpSize, "tmp-size", d.TmpSize, "size of the sandbox's tmpfs /tmp, e.g. 64MiB")
	l.WorkspaceQuota = d.WorkspaceQuota
	fs.Var(&quotaFlag{&l.WorkspaceQuota, asked}, "workspace-quota", "allocated bytes /workspace may hold, e.g. 2GiB: given (or by the task's budget), a hard bound: a write past it fails in the command (see --workspace-share); not given, the default is a ceiling that is only measured")
	fs.Int64Var(&l.WorkspaceFiles, "workspace-files", d.WorkspaceFiles, "files and directories /workspace may hold")
	l.WorkspaceShare = 0 // auto, until Flags.Check: hard when a quota is asked for
	fs.Var(&shareFlag{&l.WorkspaceShare}, "workspace-share", "the most one command adds to /workspace, which keeps its quota a hard bound (held in memory until the command ends; default "+cmdline.FormatSize(spec.DefaultWorkspaceShare)+" with --workspace-quota or a task's workspace_quota); off: measure the quota instead (every 100 ms: a burst may pass it)")
}

// applyContractLimits takes the task budget's limits for flags not given;
// a workspace quota taken sets *asked.
func applyContractLimits(set map[string]bool, b contract.Budget, l *record.LimitSettings, asked *bool) {
	if b.MemLimit > 0 && !set["mem-limit"] {
		l.MemLimit = b.MemLimit
	}
	if b.PidsLimit > 0 && !set["pids-limit"] {
		l.PidsLimit = b.PidsLimit
	}
	if b.TmpSize > 0 && !set["tmp-size"] {
		l.TmpSize = b.TmpSize
	}
	if b.WorkspaceQuota > 0 && !set["workspace-quota"] {
		l.WorkspaceQuota = b.WorkspaceQuota
		*asked = true
	}
}

// resolveShare settles --workspace-share left at auto (0): a workspace
// quota that was asked for is a hard bound, each command holding at most
// spec.DefaultWorkspaceShare of it; the built-in ceiling is measured.
func resolveShare(l *record.LimitSettings, asked bool) {
	if l.WorkspaceShare != 0 {
		return
	}
	l.WorkspaceShare = spec.DefaultWorkspaceRefuseNear
	if asked {
		l.WorkspaceShare = spec.DefaultWorkspaceShare
	}
}

// quotaFlag is --workspace-quota, which also says it was given.
type quotaFlag struct {
	p     *int64
	asked *bool
}

func (f *quotaFlag) Set(s string) error {
	n, err := cmdline.ParseSize(s)
	if err != nil {
		return err
	}
	*f.p, *f.asked = n, true
	return nil
}

func (f *quotaFlag) Placeholder() string { return "SIZE" }

func (f *quotaFlag) String() string {
	if f.p == nil {
		return ""
	}
	return cmdline.FormatSize(*f.p)
}

// networkFlag is --network (outbound through a user-mode stack) or
// --network host, bound into the settings' Network and HostNetwork.
type networkFlag struct{ on, host *bool }

func (n *networkFlag) IsBoolFlag() bool { return true }

func (n *networkFlag) Placeholder() string { return "[host]" }

func (n *networkFlag) String() string {
	switch {
	case n.on == nil || !*n.on:
		return ""
	case *n.host:
		return "host"
	}
	return "isolated"
}

func (n *networkFlag) Set(v string) error {
	switch v {
	case "true", "isolated":
		*n.on, *n.host = true, false
	case "host":
		*n.on, *n.host = true, true
	case "false", "off", "none":
		*n.on, *n.host = false, false
	default:
		return fmt.Errorf("--network %q: give --network (outbound only) or --network host", v)
	}
	return nil
}

// JoinNetwork turns "--network host" into "--network=host": --network
// alone is a boolean flag.
func JoinNetwork(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--network" || a == "-network") && i+1 < len(args) && (args[i+1] == "host" || args[i+1] == "isolated") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// SandboxOverride registers --sandbox of resume and replay: they run a
// record's commands in the sandbox the record names, and only none, the
// user's explicit consent, changes that.
func SandboxOverride(fs *cmdline.FlagSet, verb string) *string {
	defer fs.Choices("sandbox", "none")
	return fs.String("sandbox", "", "none: "+verb+" without isolation, running the record's commands on this machine as they are (needed for a run recorded with --sandbox none; default: the sandbox the run recorded, and a run recorded without one is refused)")
}

// NetworkAllowOverride registers --network-allow of resume, continue and
// replay: a run recorded with an allow-list runs with it only when the
// user gives it again (run.NetworkAllowFor).
func NetworkAllowOverride(fs *cmdline.FlagSet, verb string) *[]string {
	var v []string
	fs.Var(&allowFlag{&v}, "network-allow", "the prefixes the run recorded with --network-allow, given again to "+verb+" with them (a record alone cannot let commands reach private ranges)")
	return &v
}

func CheckSandboxOverride(v string) error {
	if v != "" && v != "none" {
		return cmdline.Usagef("--sandbox %q: the only value is none (otherwise the run's recorded sandbox is used)", v)
	}
	return nil
}

// allowFlag is --network-allow: comma-separated prefixes (CIDR; a bare
// address is its own /32 or /128), kept in their canonical form; repeated,
// the lists add up.
type allowFlag struct{ p *[]string }

func (f *allowFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		p, err := parseAllow(v)
		if err != nil {
			return err
		}
		if !slices.Contains(*f.p, p.String()) {
			*f.p = append(*f.p, p.String())
		}
	}
	return nil
}

func (f *allowFlag) Placeholder() string { return "CIDRS" }

func (f *allowFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

// parseAllow reads one --network-allow prefix: CIDR, or an address alone.
func parseAllow(v string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(v)
	if err != nil {
		a, aerr := netip.ParseAddr(v)
		if aerr != nil {
			return netip.Prefix{}, fmt.Errorf("--network-allow %q: not a prefix (10.1.2.0/24, fd00::/64) nor an address", v)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("--network-allow %q: host bits set; did you mean %s?", v, p.Masked())
	}
	return p, nil
}

// shareFlag is --workspace-share: a size, or off (-1: the workspace quota
// is measured, not hard).
type shareFlag struct{ p *int64 }

func (f *shareFlag) Set(s string) error {
	if strings.TrimSpace(s) == "off" {
		*f.p = -1
		return nil
	}
	n, err := cmdline.ParseSize(s)
	if err != nil || n <= 0 {
		return fmt.Errorf("--workspace-share %q: give a size such as 256MiB, or off", s)
	}
	*f.p = n
	return nil
}

func (f *shareFlag) Placeholder() string { return "SIZE" }

func (f *shareFlag) String() string {
	switch {
	case f.p == nil || *f.p == 0:
		return "" // auto
	case *f.p < 0:
		return "off"
	}
	return cmdline.FormatSize(*f.p)
}
