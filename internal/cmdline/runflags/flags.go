// Package runflags binds the flags of the commands that start or go on
// with a run (apodex run, resume, continue, mcp serve) into run.Settings
// and the parts a run is given: the model group (provider, model,
// endpoint), the output group (--json, --quiet, progress, the run's log),
// budgets, sandbox limits and network, MCP servers, project instructions,
// and the configuration files' values for flags not given.
//
// Guarantees: every flag's default is run.Defaults()' value (but
// --workspace-share's, which Check settles: hard when a workspace quota is
// asked for, measured otherwise); a flag given
// on the command line beats the task file's budget, which beats the
// configuration (ApplyConfig, ApplyContract); a bad value is a usage error
// (exit 2) that names the flag and the form it takes.
package runflags

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// Flags are apodex run's flags. The flags of settings bind into Settings,
// whose defaults (run.Defaults) are the flags' defaults.
type Flags struct {
	Model          Model
	Out            Output
	Home, Inputs   string
	Task           string
	World          string
	Override       bool
	AllowOutside   bool
	Corpus         string
	MCPConfig      *string
	NoInstructions bool
	Repo           string
	RepoAll        bool
	Settings       run.Settings
	// quotaAsked: a workspace quota was given (flag, configuration or task
	// budget), which makes it a hard bound unless --workspace-share off.
	quotaAsked bool
}

func (f *Flags) Register(fs *cmdline.FlagSet) {
	d := run.Defaults()
	f.Settings = run.Defaults() // a setting without a flag keeps its default
	s := &f.Settings
	f.Model.Register(fs)
	f.Out.Register(fs)
	fs.StringVar(&f.Task, "task", "", "task contract file (task.yaml): objective, inputs, budget, deliverables, verification")
	fs.BoolVar(&f.Override, "objective-override", false, "with --task, let an OBJECTIVE argument replace the task file's objective")
	fs.BoolVar(&f.AllowOutside, "allow-outside-task", false, "with --task, let the task's paths (inputs, corpus, files, json_schema) lie outside the task file's directory or lead out of it through symbolic links")
	fs.StringVar(&f.World, "world", "", "run one rollout of a stored world (an id from `apodex worlds list`): its task, inputs and workspace")
	fs.StringVar(&f.Inputs, "inputs", "", "directory whose files the agent sees, read-only, at /inputs (overrides the task file's)")
	fs.StringVar(&f.Repo, "repo", "", "work on this tree: its files (a git checkout's, without .git and ignored paths) are copied to /workspace; the tree is not written during the run (apodex diff / apply bring the change back)")
	fs.BoolVar(&f.RepoAll, "repo-all", false, "with --repo: copy every file, .git and ignored paths included")
	fs.BoolVar(&f.NoInstructions, "no-project-instructions", false, "leave AGENTS.md / CLAUDE.md (of the --repo tree or the task's directory) and ~/.config/apodex/AGENTS.md out of the system prompt")
	fs.StringVar(&f.Home, "home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
	fs.IntVar(&s.Budget.MaxTurns, "max-turns", d.Budget.MaxTurns, "stop after this many model calls (0: no limit)")
	fs.IntVar(&s.Budget.MaxToolCalls, "max-tool-calls", d.Budget.MaxToolCalls, "stop after this many tool calls (0: no limit)")
	fs.IntVar(&s.Budget.MaxTokens, "max-tokens", d.Budget.MaxTokens, "stop once this many tokens (prompt + completion, summed over calls) are used (0: no limit)")
	cmdline.DurationFlag(fs, &s.Timeout, "timeout", d.Timeout, "hard wall-clock limit for the whole run, e.g. 15m (0: none)")
	cmdline.DurationFlag(fs, &s.SoftDeadline, "soft-deadline", d.SoftDeadline, "wall-clock soft deadline, e.g. 10m: near it the agent is told to wrap up, at it the loop ends and a tool-free call salvages a partial result (0: none)")
	fs.IntVar(&s.Context.Window, "context-window", d.Context.Window, "the model's context window in tokens (default: known for common model names, else 32768)")
	fs.Float64Var(&s.Context.At, "compact-at", d.Context.At, "compact the context when the prompt reaches this fraction of the window")
	fs.Float64Var(&s.Context.To, "compact-to", d.Context.To, "compaction aims for this fraction of the window")
	cmdline.DurationFlag(fs, &s.CommandTimeout, "command-timeout", d.CommandTimeout, "default timeout of one bash command")
	fs.IntVar(&s.MaxAttempts, "retries", d.MaxAttempts, "attempts per model call on 429, 5xx and connection errors")
	cmdline.SizeFlag(fs, &s.ScratchQuota, "scratch-quota", d.ScratchQuota, "how much every agent may write under /outputs/scratch, with bash or the file tools, e.g. 256MiB or 1GiB")
	fs.StringVar(&s.Sandbox, "sandbox", d.Sandbox, "auto (bwrap if usable, else native), bwrap (bubblewrap), native (built-in namespaces + Landlock) or none (no isolation: only if you trust the model with your machine)")
	fs.Var(&networkFlag{on: &s.Network, host: &s.HostNetwork}, "network", "let sandboxed commands reach the network (and fetch reach http(s) URLs): --network gives outbound access through a user-mode stack (pasta) without the host's loopback; --network host shares the host's network, loopback included")
	fs.Var(&allowFlag{&s.NetworkAllow}, "network-allow", "with --network: prefixes sandboxed commands may reach although they are private, link-local or otherwise refused, e.g. 10.1.2.0/24,fd00::/64 (repeatable)")
	registerLimits(fs, &s.Limits, d.Limits, &f.quotaAsked)
	f.MCPConfig = MCPConfigFlag(fs)
	fs.StringVar(&f.Corpus, "corpus", "", "directory of documents the agent searches (search, fetch) and reads at /inputs/corpus (overrides the task file's corpus)")
	fs.BoolVar(&s.Evidence.FetchPrivate, "fetch-private", d.Evidence.FetchPrivate, "with --network: let fetch reach private and loopback addresses")
	fs.StringVar(&s.Mode, "mode", d.Mode, "react (one agent) or team (a lead that plans on a Task Board and dispatches subagents it designs)")
	fs.IntVar(&s.Team.Concurrency, "concurrency", d.Team.Concurrency, "team: subagents running at once")
	fs.StringVar(&s.Team.Isolation, "isolation", d.Team.Isolation, "team: per-agent (each subagent a private copy-on-write workspace, merged on report) or shared (one workspace, each agent writes only /workspace/<agent-id>/)")
	fs.BoolVar(&s.Team.Plan, "plan", d.Team.Plan, "team: start the lead in planning mode (board and read-only tools until finish_planning)")
	fs.IntVar(&s.Team.SubBudget.MaxTurns, "sub-max-turns", d.Team.SubBudget.MaxTurns, "team: model calls per subagent")
	fs.IntVar(&s.Team.SubBudget.MaxToolCalls, "sub-max-tool-calls", d.Team.SubBudget.MaxToolCalls, "team: tool calls per subagent")
	fs.IntVar(&s.Team.VerifyMaxTurns, "verify-max-turns", d.Team.VerifyMaxTurns, "team: model calls per verifier (verify)")
	fs.StringVar(&s.Team.Effort, "effort", d.Team.Effort, "team: adaptive|off: at finish, investigate unsettled load-bearing claims in effort waves")
	fs.IntVar(&s.Team.EffortWidth, "effort-width", d.Team.EffortWidth, "team: investigators per claim in an effort wave")
	fs.IntVar(&s.Team.EffortWaves, "effort-waves", d.Team.EffortWaves, "team: effort waves at most")
	fs.IntVar(&s.Team.EffortBudget, "effort-budget", d.Team.EffortBudget, "team: effort's token budget, in percent of the run's tokens so far (0: no budget)")
	fs.StringVar(&s.Team.Synthesis, "synthesis", d.Team.Synthesis, "team: on|off: a writer writes the .md deliverables from the claim–evidence graph after finish")
	cmdline.DurationFlag(fs, &s.Team.SubTimeout, "sub-timeout", d.Team.SubTimeout, "team: wall-clock limit per subagent, e.g. 10m (0: none)")
	fs.Var(&ignoreFlag{&s.Team.MergeIgnore}, "merge-ignore", "team: comma-separated patterns of files a subagent's merge leaves out of /workspace (a name matches at any depth; \"none\" merges everything)")
	fs.Choices("sandbox", "auto", "bwrap", "native", "none")
	fs.Choices("mode", run.ModeReact, run.ModeTeam)
	fs.Choices("isolation", "per-agent", "shared")
	fs.Choices("effort", "adaptive", "off")
	fs.Choices("synthesis", run.SynthesisOn, run.SynthesisOff)
	fs.BoolVar(&s.RequireFinish, "require-finish", d.RequireFinish, "only a finish call ends an agent (default: after one nudge, a second answer without a tool call is taken as the final summary)")
}

// Check validates the flags' values (the message says what to do) and
// settles the defaults that depend on others (--workspace-share).
func (f *Flags) Check() error {
	resolveShare(&f.Settings.Limits, f.quotaAsked)
	s := f.Settings
	switch {
	case s.Sandbox != "auto" && s.Sandbox != "bwrap" && s.Sandbox != "native" && s.Sandbox != "none":
		return fmt.Errorf("--sandbox %q: use auto, bwrap, native or none", s.Sandbox)
	case s.Budget.MaxTurns < 0 || s.Budget.MaxToolCalls < 0 || s.Budget.MaxTokens < 0 || s.Timeout < 0 || s.SoftDeadline < 0 || s.Context.Window < 0 || s.ScratchQuota < 0:
		return errors.New("budgets, deadlines, --scratch-quota and --context-window must be ≥ 0")
	case s.Mode != run.ModeReact && s.Mode != run.ModeTeam:
		return fmt.Errorf("--mode %q: use react or team", s.Mode)
	case s.Team.Isolation != "per-agent" && s.Team.Isolation != "shared":
		return fmt.Errorf("--isolation %q: use per-agent or shared", s.Team.Isolation)
	case s.Team.Concurrency < 1 || s.Team.SubBudget.MaxTurns < 0 || s.Team.SubBudget.MaxToolCalls < 0 || s.Team.VerifyMaxTurns < 0 || s.Team.SubTimeout < 0:
		return errors.New("--concurrency must be ≥ 1 and the subagent budgets ≥ 0")
	case s.Team.Effort != "adaptive" && s.Team.Effort != "off":
		return fmt.Errorf("--effort %q: use adaptive or off", s.Team.Effort)
	case s.Team.Synthesis != run.SynthesisOn && s.Team.Synthesis != run.SynthesisOff:
		return fmt.Errorf("--synthesis %q: use on or off", s.Team.Synthesis)
	case s.Team.EffortWidth < 1 || s.Team.EffortWaves < 0 || s.Team.EffortBudget < 0:
		return errors.New("--effort-width must be ≥ 1, --effort-waves and --effort-budget ≥ 0")
	case s.Team.Plan && s.Mode != run.ModeTeam:
		return errors.New("--plan needs --mode team")
	case s.MaxAttempts < 1 || s.CommandTimeout <= 0:
		return errors.New("--retries must be ≥ 1 and --command-timeout > 0")
	case len(s.NetworkAllow) > 0 && (!s.Network || s.HostNetwork):
		return errors.New("--network-allow needs --network (outbound; --network host refuses nothing)")
	case s.Context.At <= 0 || s.Context.At > 1 || s.Context.To <= 0 || s.Context.To >= s.Context.At:
		return errors.New("need 0 < --compact-to < --compact-at ≤ 1 (e.g. --compact-at 0.8 --compact-to 0.5)")
	}
	return f.Out.Check()
}

// ApplyContract takes the contract's budget for every setting whose flag
// was not given: flags on the command line win.
func (f *Flags) ApplyContract(set map[string]bool, c *contract.Contract) {
	b, s := c.Budget, &f.Settings
	if b.Turns > 0 && !set["max-turns"] {
		s.Budget.MaxTurns = b.Turns
	}
	if b.ToolCalls > 0 && !set["max-tool-calls"] {
		s.Budget.MaxToolCalls = b.ToolCalls
	}
	if b.Tokens > 0 && !set["max-tokens"] {
		s.Budget.MaxTokens = b.Tokens
	}
	if b.SoftDeadline > 0 && !set["soft-deadline"] {
		s.SoftDeadline = record.Duration(b.SoftDeadline)
	}
	if b.Timeout > 0 && !set["timeout"] {
		s.Timeout = record.Duration(b.Timeout)
	}
	applyContractLimits(set, b, &s.Limits, &f.quotaAsked)
	if b.Concurrency > 0 && !set["concurrency"] {
		s.Team.Concurrency = b.Concurrency
	}
}

// InstructionsDir is where the project's AGENTS.md is looked for: the
// --repo tree, else the task file's directory ("" for none).
func (f *Flags) InstructionsDir() string {
	switch {
	case f.Repo != "":
		return f.Repo
	case f.Task != "":
		return filepath.Dir(f.Task)
	}
	return ""
}

// ignoreFlag is --merge-ignore: comma-separated patterns; "none" (or "")
// is an empty, non-nil list, so nothing is left out.
type ignoreFlag struct{ p *[]string }

func (f *ignoreFlag) Set(s string) error {
	out := []string{}
	if strings.TrimSpace(s) != "none" {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	*f.p = out
	return nil
}

func (f *ignoreFlag) Placeholder() string { return "LIST" }

func (f *ignoreFlag) String() string {
	switch {
	case f.p == nil:
		return ""
	case *f.p != nil && len(*f.p) == 0:
		return "none"
	}
	return strings.Join(*f.p, ",")
}
