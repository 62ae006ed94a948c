package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/world"
)

// loadWorld finds the stored world of --world and its task.
func loadWorld(id, home, task, inputs string) (*world.World, *contract.Contract, error) {
	if task != "" || inputs != "" {
		return nil, nil, errors.New("--world brings its own task and inputs: drop --task and --inputs")
	}
	w, err := world.NewStore(homeDir(home)).Get(id)
	if err != nil {
		return nil, nil, err
	}
	c, err := w.Contract()
	if err != nil {
		return nil, nil, fmt.Errorf("world %s: %w", w.ID, err)
	}
	return w, c, nil
}

// runFlags are apodex run's flags. The flags of settings bind into set,
// whose defaults (run.Defaults) are the flags' defaults.
type runFlags struct {
	model        modelFlags
	out          outputFlags
	home, inputs string
	task         string
	world        string
	override     bool
	allowOutside bool
	corpus       string
	mcpConfig    *string
	noInstr      bool
	repo         string
	repoAll      bool
	set          run.Settings
}

func (f *runFlags) register(fs *flagSet) {
	d := run.Defaults()
	f.set = run.Defaults() // a setting without a flag keeps its default
	s := &f.set
	f.model.register(fs)
	f.out.register(fs)
	fs.StringVar(&f.task, "task", "", "task contract file (task.yaml): objective, inputs, budget, deliverables, verification")
	fs.BoolVar(&f.override, "objective-override", false, "with --task, let an OBJECTIVE argument replace the task file's objective")
	fs.BoolVar(&f.allowOutside, "allow-outside-task", false, "with --task, let the task's paths (inputs, corpus, files, json_schema) lie outside the task file's directory or lead out of it through symbolic links")
	fs.StringVar(&f.world, "world", "", "run one rollout of a stored world (an id from `apodex worlds list`): its task, inputs and workspace")
	fs.StringVar(&f.inputs, "inputs", "", "directory whose files the agent sees, read-only, at /inputs (overrides the task file's)")
	fs.StringVar(&f.repo, "repo", "", "work on this tree: its files (a git checkout's, without .git and ignored paths) are copied to /workspace; the tree is not written during the run (apodex diff / apply bring the change back)")
	fs.BoolVar(&f.repoAll, "repo-all", false, "with --repo: copy every file, .git and ignored paths included")
	fs.BoolVar(&f.noInstr, "no-project-instructions", false, "leave AGENTS.md / CLAUDE.md (of the --repo tree or the task's directory) and ~/.config/apodex/AGENTS.md out of the system prompt")
	fs.StringVar(&f.home, "home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
	fs.IntVar(&s.Budget.MaxTurns, "max-turns", d.Budget.MaxTurns, "stop after this many model calls (0: no limit)")
	fs.IntVar(&s.Budget.MaxToolCalls, "max-tool-calls", d.Budget.MaxToolCalls, "stop after this many tool calls (0: no limit)")
	fs.IntVar(&s.Budget.MaxTokens, "max-tokens", d.Budget.MaxTokens, "stop once this many tokens (prompt + completion, summed over calls) are used (0: no limit)")
	durationFlag(fs, &s.Timeout, "timeout", d.Timeout, "hard wall-clock limit for the whole run, e.g. 15m (0: none)")
	durationFlag(fs, &s.SoftDeadline, "soft-deadline", d.SoftDeadline, "wall-clock soft deadline, e.g. 10m: near it the agent is told to wrap up, at it the loop ends and a tool-free call salvages a partial result (0: none)")
	fs.IntVar(&s.Context.Window, "context-window", d.Context.Window, "the model's context window in tokens (default: known for common model names, else 32768)")
	fs.Float64Var(&s.Context.At, "compact-at", d.Context.At, "compact the context when the prompt reaches this fraction of the window")
	fs.Float64Var(&s.Context.To, "compact-to", d.Context.To, "compaction aims for this fraction of the window")
	durationFlag(fs, &s.CommandTimeout, "command-timeout", d.CommandTimeout, "default timeout of one bash command")
	fs.IntVar(&s.MaxAttempts, "retries", d.MaxAttempts, "attempts per model call on 429, 5xx and connection errors")
	sizeFlag(fs, &s.ScratchQuota, "scratch-quota", d.ScratchQuota, "how much every agent may write under /outputs/scratch, with bash or the file tools, e.g. 256MiB or 1GiB")
	fs.StringVar(&s.Sandbox, "sandbox", d.Sandbox, "auto (bwrap if usable, else native), bwrap (bubblewrap), native (built-in namespaces + Landlock) or none (no isolation: only if you trust the model with your machine)")
	fs.Var(&networkFlag{on: &s.Network, host: &s.HostNetwork}, "network", "let sandboxed commands reach the network (and fetch reach http(s) URLs): --network gives outbound access through a user-mode stack (pasta) without the host's loopback; --network host shares the host's network, loopback included")
	registerLimits(fs, &s.Limits, d.Limits)
	f.mcpConfig = fs.mcpConfigFlag()
	fs.StringVar(&f.corpus, "corpus", "", "directory of documents the agent searches (search, fetch) and reads at /inputs/corpus (overrides the task file's corpus)")
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
	durationFlag(fs, &s.Team.SubTimeout, "sub-timeout", d.Team.SubTimeout, "team: wall-clock limit per subagent, e.g. 10m (0: none)")
	fs.Var(&ignoreFlag{&s.Team.MergeIgnore}, "merge-ignore", "team: comma-separated patterns of files a subagent's merge leaves out of /workspace (a name matches at any depth; \"none\" merges everything)")
	fs.choices("sandbox", "auto", "bwrap", "native", "none")
	fs.choices("mode", run.ModeReact, run.ModeTeam)
	fs.choices("isolation", "per-agent", "shared")
	fs.choices("effort", "adaptive", "off")
	fs.choices("synthesis", run.SynthesisOn, run.SynthesisOff)
	fs.BoolVar(&s.RequireFinish, "require-finish", d.RequireFinish, "only a finish call ends an agent (default: after one nudge, a second answer without a tool call is taken as the final summary)")
}

// check validates the flags' values; the message says what to do.
func (f *runFlags) check() error {
	s := f.set
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
	case s.Context.At <= 0 || s.Context.At > 1 || s.Context.To <= 0 || s.Context.To >= s.Context.At:
		return errors.New("need 0 < --compact-to < --compact-at ≤ 1 (e.g. --compact-at 0.8 --compact-to 0.5)")
	}
	return f.out.check()
}

// applyContract takes the contract's budget for every setting whose flag
// was not given: flags on the command line win.
func (f *runFlags) applyContract(set map[string]bool, c *contract.Contract) {
	b, s := c.Budget, &f.set
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
	applyContractLimits(set, b, &s.Limits)
	if b.Concurrency > 0 && !set["concurrency"] {
		s.Team.Concurrency = b.Concurrency
	}
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags] OBJECTIVE   (or - to read it from standard input; or --task task.yaml)", stdout, stderr)
	var f runFlags
	f.register(fs)
	pos, err := fs.parse(joinNetwork(args))
	if err != nil {
		return err
	}
	given := fs.given() // before the config fills the rest: a task file's budget beats the config's defaults
	resolved, err := applyConfig(fs, f.home, f.model.profile)
	if err != nil {
		return err
	}
	objective := strings.TrimSpace(strings.Join(pos, " "))
	if len(pos) == 1 && pos[0] == "-" {
		if objective, err = readObjective(stdin(ctx)); err != nil {
			return err
		}
	}
	var c *contract.Contract
	var w *world.World
	switch {
	case f.world != "":
		if w, c, err = loadWorld(f.world, f.home, f.task, f.inputs); err != nil {
			return usagef("%v", err)
		}
		if objective != "" {
			return usagef("--world %s brings its own objective; drop the OBJECTIVE argument", f.world)
		}
		f.applyContract(given, c)
	case f.task != "":
		if c, err = contract.LoadWith(f.task, contract.Options{AllowOutside: f.allowOutside}); err != nil {
			return usagef("the task file is not valid:\n%v", err)
		}
		if objective != "" && !f.override {
			return usagef("--task %s has its own objective; drop the OBJECTIVE argument, or pass --objective-override to replace it", f.task)
		}
		f.applyContract(given, c)
	case f.override:
		return usagef("--objective-override needs --task")
	case f.allowOutside:
		return usagef("--allow-outside-task needs --task")
	case objective == "":
		return usagef("no objective: pass what the agent should do, e.g. apodex run --inputs ./data \"Sum the value column of /inputs/data.csv\", or --task task.yaml")
	}
	if f.repoAll && f.repo == "" {
		return usagef("--repo-all needs --repo")
	}
	if err := f.check(); err != nil {
		return usagef("%v", err)
	}
	var named []string
	if c != nil {
		named = c.MCP
	}
	servers, err := runMCP(f, resolved.Profile, named)
	if err != nil {
		return err
	}
	model, info, err := f.model.build()
	if err != nil {
		return err
	}
	home := homeDir(f.home)
	id := run.NewID(time.Now())
	dir := filepath.Join(home, "runs", id)
	logger, closeLog := f.out.logger(dir)
	defer closeLog()
	if logger != nil {
		model = loggedModel(model, logger)
	}
	cfg := run.Config{
		Settings: f.set, Home: home, Objective: objective, Contract: c, InputsDir: f.inputs, CorpusDir: f.corpus,
		Model: model, ModelInfo: info, Logger: logger, NewID: func() string { return id }, World: w, MCP: servers,
		Repo: f.repo, RepoAll: f.repoAll, Halt: haltOf(ctx), HaltNote: "Ctrl-C or SIGTERM",
	}
	if !f.noInstr {
		if cfg.Instructions, err = projectInstructions(f.instructionsDir()); err != nil {
			return usagef("%v", err)
		}
	}
	if cfg.Team.EffortBudget == 0 {
		cfg.Team.EffortBudget = -1 // --effort-budget 0: no budget (the record's 0 means the default)
	}
	ctx, stop := f.out.startProgress(ctx, dir, 0, stderr)
	stopTelemetry := startTelemetry(ctx, dir, 0, stderr)
	s, err := run.Execute(ctx, cfg)
	stop(s.RunID != "")
	stopTelemetry(s.RunID != "")
	return f.out.finish(s, err, stdout, stderr)
}

// maxObjective bounds an objective read from standard input.
const maxObjective = 1 << 20

// readObjective reads `apodex run -`'s objective from standard input.
func readObjective(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxObjective+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read the objective from standard input: %w", err)
	case len(b) > maxObjective:
		return "", usagef("the objective on standard input is over %d bytes; put the material in a file under --inputs and say what to do with it", maxObjective)
	case strings.TrimSpace(string(b)) == "":
		return "", usagef("run -: standard input held no objective; pipe one in (echo \"Sum the column\" | apodex run -) or give it as the argument")
	}
	return strings.TrimSpace(string(b)), nil
}

// instructionsDir is where the project's AGENTS.md is looked for: the
// --repo tree, else the task file's directory ("" for none).
func (f *runFlags) instructionsDir() string {
	switch {
	case f.repo != "":
		return f.repo
	case f.task != "":
		return filepath.Dir(f.task)
	}
	return ""
}

// finish prints a run's outcome (the summary, or JSON) and turns it into
// the command's error: nil only when the run completed.
func (o *outputFlags) finish(s run.Summary, err error, stdout, stderr io.Writer) error {
	switch {
	case err != nil && s.RunID == "":
		return err
	case errors.Is(err, run.ErrHalted):
		if o.json {
			writeJSON(stdout, s)
		}
		fmt.Fprintf(stderr, "apodex: run %s stopped; go on with: apodex resume %s\n", s.RunID, s.RunID)
		return exitError(exitFailed)
	case err != nil:
		fmt.Fprintf(stderr, "apodex: %v\n", err)
	}
	if o.json {
		writeJSON(stdout, s)
	} else {
		printSummary(stdout, s)
	}
	if s.Status != run.StatusCompleted {
		if !o.quiet && !o.json && s.Error != "" {
			fmt.Fprintf(stderr, "apodex: ended with %s: %s\n", s.Termination, oneLine(s.Error))
		}
		if s.Status == run.StatusStopped && !o.json {
			hint := map[string]string{"budget_turns": " --budget turns=+10", "budget_tool_calls": " --budget tool_calls=+50", "budget_tokens": " --budget tokens=+200000"}[s.Termination]
			fmt.Fprintf(stderr, "apodex: run %s stopped (%s); go on with: apodex resume%s %s\n", s.RunID, s.Termination, hint, s.RunID)
		}
		return exitError(exitFailed)
	}
	return nil
}

func printSummary(w io.Writer, s run.Summary) {
	fmt.Fprintf(w, "run %s: %s (%s)\n", s.RunID, s.Status, s.Termination)
	if s.Summary != "" {
		fmt.Fprintf(w, "summary: %s\n", oneLine(s.Summary))
	}
	if s.Partial != "" {
		fmt.Fprintf(w, "partial result: %s\n", s.Partial)
	}
	if s.Error != "" && len(s.Failures) == 0 {
		fmt.Fprintf(w, "error: %s\n", oneLine(s.Error))
	}
	for _, f := range s.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", oneLine(f))
	}
	fmt.Fprintf(w, "turns %d, tool calls %d, tokens %d (prompt %d, completion %d)\n",
		s.Turns, s.ToolCalls, s.Usage.TotalTokens, s.Usage.PromptTokens, s.Usage.CompletionTokens)
	if s.Delivery != nil {
		fmt.Fprintln(w, "delivery:")
		for _, e := range s.Delivery.Entries {
			if e.Status == "delivered" {
				fmt.Fprintf(w, "  delivered %s  %d bytes  %s\n", e.Path, e.Bytes, e.SHA256)
			} else {
				fmt.Fprintf(w, "  FAILED    %s  %s\n", e.Path, e.Reason)
			}
		}
		for _, u := range s.Delivery.Undeclared {
			fmt.Fprintf(w, "  undeclared (not delivered) %s\n", u)
		}
	}
	for _, v := range s.Verify {
		mark := "passed"
		if !v.Passed {
			mark = "FAILED"
		}
		fmt.Fprintf(w, "verify %s: %s %s\n", v.Label(), mark, oneLine(v.Detail))
	}
	fmt.Fprintf(w, "record: %s/events.jsonl\n", s.RunDir)
	if len(s.Files) > 0 {
		fmt.Fprintf(w, "files (under %s):\n", s.RunDir)
		for i, f := range s.Files {
			if i == shownFiles && len(s.Files) > shownFiles+1 {
				fmt.Fprintf(w, "  … and %d more (apodex show --json %s)\n", len(s.Files)-shownFiles+s.FilesOmitted, s.RunID)
				return
			}
			fmt.Fprintf(w, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256)
		}
		if s.FilesOmitted > 0 {
			fmt.Fprintf(w, "  … and %d more, not listed in the record\n", s.FilesOmitted)
		}
	}
}

// shownFiles is how many produced files the run's summary prints.
const shownFiles = 50

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

func (f *ignoreFlag) placeholder() string { return "LIST" }

func (f *ignoreFlag) String() string {
	switch {
	case f.p == nil:
		return ""
	case *f.p != nil && len(*f.p) == 0:
		return "none"
	}
	return strings.Join(*f.p, ",")
}
