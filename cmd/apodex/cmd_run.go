package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
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

// runFlags are apodex run's flags.
type runFlags struct {
	model         modelFlags
	out           outputFlags
	home, inputs  string
	task          string
	world         string
	override      bool
	sandbox       string
	network       networkFlag
	limits        limitFlags
	corpus        string
	fetchPrivate  bool
	budget        agent.Budget
	cmdTimeout    time.Duration
	timeout, soft time.Duration
	ctxw          agent.Context
	attempts      int
	scratchQuota  int64
	mode          string
	team          run.TeamConfig
	requireFinish bool
	mergeIgnore   string
	effortBudget  int
}

func (f *runFlags) register(fs *flagSet) {
	f.model.register(fs)
	f.out.register(fs)
	fs.StringVar(&f.task, "task", "", "task contract file (task.yaml): objective, inputs, budget, deliverables, verification")
	fs.BoolVar(&f.override, "objective-override", false, "with --task, let an OBJECTIVE argument replace the task file's objective")
	fs.StringVar(&f.world, "world", "", "run one rollout of a stored world (an id from `apodex worlds list`): its task, inputs and workspace")
	fs.StringVar(&f.inputs, "inputs", "", "directory whose files the agent sees, read-only, at /inputs (overrides the task file's)")
	fs.StringVar(&f.home, "home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
	fs.IntVar(&f.budget.MaxTurns, "max-turns", 50, "stop after this many model calls (0: no limit)")
	fs.IntVar(&f.budget.MaxToolCalls, "max-tool-calls", 200, "stop after this many tool calls (0: no limit)")
	fs.IntVar(&f.budget.MaxTokens, "max-tokens", 2_000_000, "stop once this many tokens (prompt + completion, summed over calls) are used (0: no limit)")
	durationFlag(fs, &f.timeout, "timeout", 0, "hard wall-clock limit for the whole run, e.g. 15m (0: none)")
	durationFlag(fs, &f.soft, "soft-deadline", 0, "wall-clock soft deadline, e.g. 10m: near it the agent is told to wrap up, at it the loop ends and a tool-free call salvages a partial result (0: none)")
	fs.IntVar(&f.ctxw.Window, "context-window", 0, "the model's context window in tokens (default: known for common model names, else 32768)")
	fs.Float64Var(&f.ctxw.At, "compact-at", 0.8, "compact the context when the prompt reaches this fraction of the window")
	fs.Float64Var(&f.ctxw.To, "compact-to", 0.5, "compaction aims for this fraction of the window")
	durationFlag(fs, &f.cmdTimeout, "command-timeout", 120*time.Second, "default timeout of one bash command")
	fs.IntVar(&f.attempts, "retries", 6, "attempts per model call on 429, 5xx and connection errors")
	sizeFlag(fs, &f.scratchQuota, "scratch-quota", 256<<20, "how much every agent may write under /outputs/scratch, with bash or the file tools, e.g. 256MiB or 1GiB")
	fs.StringVar(&f.sandbox, "sandbox", "auto", "auto (bwrap if usable, else native), bwrap (bubblewrap), native (built-in namespaces + Landlock) or none (no isolation: only if you trust the model with your machine)")
	fs.Var(&f.network, "network", "let sandboxed commands reach the network (and fetch reach http(s) URLs): --network gives outbound access through a user-mode stack (pasta) without the host's loopback; --network host shares the host's network, loopback included")
	f.limits.register(fs)
	fs.StringVar(&f.corpus, "corpus", "", "directory of documents the agent searches (search, fetch) and reads at /inputs/corpus (overrides the task file's corpus)")
	fs.BoolVar(&f.fetchPrivate, "fetch-private", false, "with --network: let fetch reach private and loopback addresses")
	fs.StringVar(&f.mode, "mode", "react", "react (one agent) or team (a lead that plans on a Task Board and dispatches subagents it designs)")
	fs.IntVar(&f.team.Concurrency, "concurrency", 8, "team: subagents running at once")
	fs.StringVar(&f.team.Isolation, "isolation", "per-agent", "team: per-agent (each subagent a private copy-on-write workspace, merged on report) or shared (one workspace, each agent writes only /workspace/<agent-id>/)")
	fs.BoolVar(&f.team.Plan, "plan", false, "team: start the lead in planning mode (board and read-only tools until finish_planning)")
	fs.IntVar(&f.team.SubBudget.MaxTurns, "sub-max-turns", 30, "team: model calls per subagent")
	fs.IntVar(&f.team.SubBudget.MaxToolCalls, "sub-max-tool-calls", 100, "team: tool calls per subagent")
	fs.IntVar(&f.team.VerifyMaxTurns, "verify-max-turns", 6, "team: model calls per verifier (verify)")
	fs.StringVar(&f.team.Effort, "effort", "adaptive", "team: adaptive|off: at finish, investigate unsettled load-bearing claims in effort waves")
	fs.IntVar(&f.team.EffortWidth, "effort-width", 2, "team: investigators per claim in an effort wave")
	fs.IntVar(&f.team.EffortWaves, "effort-waves", 2, "team: effort waves at most")
	fs.IntVar(&f.effortBudget, "effort-budget", 25, "team: effort's token budget, in percent of the run's tokens so far (0: no budget)")
	fs.StringVar(&f.team.Synthesis, "synthesis", "on", "team: on|off: a writer writes the .md deliverables from the claim–evidence graph after finish")
	durationFlag(fs, &f.team.SubTimeout, "sub-timeout", 0, "team: wall-clock limit per subagent, e.g. 10m (0: none)")
	fs.StringVar(&f.mergeIgnore, "merge-ignore", "__pycache__,*.pyc,.pytest_cache", "team: comma-separated patterns of files a subagent's merge leaves out of /workspace (a name matches at any depth; \"none\" merges everything)")
	fs.BoolVar(&f.requireFinish, "require-finish", false, "only a finish call ends an agent (default: after one nudge, a second answer without a tool call is taken as the final summary)")
}

// check validates the flags' values; the message says what to do.
func (f *runFlags) check() error {
	switch {
	case f.sandbox != "auto" && f.sandbox != "bwrap" && f.sandbox != "native" && f.sandbox != "none":
		return fmt.Errorf("--sandbox %q: use auto, bwrap, native or none", f.sandbox)
	case f.budget.MaxTurns < 0 || f.budget.MaxToolCalls < 0 || f.budget.MaxTokens < 0 || f.timeout < 0 || f.soft < 0 || f.ctxw.Window < 0 || f.scratchQuota < 0:
		return errors.New("budgets, deadlines, --scratch-quota and --context-window must be ≥ 0")
	case f.mode != run.ModeReact && f.mode != run.ModeTeam:
		return fmt.Errorf("--mode %q: use react or team", f.mode)
	case f.team.Isolation != "per-agent" && f.team.Isolation != "shared":
		return fmt.Errorf("--isolation %q: use per-agent or shared", f.team.Isolation)
	case f.team.Concurrency < 1 || f.team.SubBudget.MaxTurns < 0 || f.team.SubBudget.MaxToolCalls < 0 || f.team.VerifyMaxTurns < 0 || f.team.SubTimeout < 0:
		return errors.New("--concurrency must be ≥ 1 and the subagent budgets ≥ 0")
	case f.team.Effort != "adaptive" && f.team.Effort != "off":
		return fmt.Errorf("--effort %q: use adaptive or off", f.team.Effort)
	case f.team.Synthesis != "on" && f.team.Synthesis != "off":
		return fmt.Errorf("--synthesis %q: use on or off", f.team.Synthesis)
	case f.team.EffortWidth < 1 || f.team.EffortWaves < 0 || f.effortBudget < 0:
		return errors.New("--effort-width must be ≥ 1, --effort-waves and --effort-budget ≥ 0")
	case f.team.Plan && f.mode != run.ModeTeam:
		return errors.New("--plan needs --mode team")
	case f.attempts < 1 || f.cmdTimeout <= 0:
		return errors.New("--retries must be ≥ 1 and --command-timeout > 0")
	case f.ctxw.At <= 0 || f.ctxw.At > 1 || f.ctxw.To <= 0 || f.ctxw.To >= f.ctxw.At:
		return errors.New("need 0 < --compact-to < --compact-at ≤ 1 (e.g. --compact-at 0.8 --compact-to 0.5)")
	}
	return f.out.check()
}

// applyContract takes the contract's budget for every limit whose flag was
// not given: flags on the command line win.
func (f *runFlags) applyContract(set map[string]bool, c *contract.Contract) {
	b := c.Budget
	if b.Turns > 0 && !set["max-turns"] {
		f.budget.MaxTurns = b.Turns
	}
	if b.ToolCalls > 0 && !set["max-tool-calls"] {
		f.budget.MaxToolCalls = b.ToolCalls
	}
	if b.Tokens > 0 && !set["max-tokens"] {
		f.budget.MaxTokens = b.Tokens
	}
	if b.SoftDeadline > 0 && !set["soft-deadline"] {
		f.soft = b.SoftDeadline
	}
	if b.Timeout > 0 && !set["timeout"] {
		f.timeout = b.Timeout
	}
	f.limits.applyContract(set, b)
	if b.Concurrency > 0 && !set["concurrency"] {
		f.team.Concurrency = b.Concurrency
	}
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[flags] OBJECTIVE   (or --task task.yaml)", stdout, stderr)
	var f runFlags
	f.register(fs)
	pos, err := fs.parse(joinNetwork(args))
	if err != nil {
		return err
	}
	given := fs.given() // before the config fills the rest: a task file's budget beats the config's defaults
	if _, err := applyConfig(fs, f.home, f.model.profile); err != nil {
		return err
	}
	objective := strings.TrimSpace(strings.Join(pos, " "))
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
		if c, err = contract.Load(f.task); err != nil {
			return usagef("the task file is not valid:\n%v", err)
		}
		if objective != "" && !f.override {
			return usagef("--task %s has its own objective; drop the OBJECTIVE argument, or pass --objective-override to replace it", f.task)
		}
		f.applyContract(given, c)
	case f.override:
		return usagef("--objective-override needs --task")
	case objective == "":
		return usagef("no objective: pass what the agent should do, e.g. apodex run --inputs ./data \"Sum the value column of /inputs/data.csv\", or --task task.yaml")
	}
	if err := f.check(); err != nil {
		return usagef("%v", err)
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
		Home: home, Objective: objective, Contract: c, InputsDir: f.inputs,
		Model: model, ModelInfo: info, Budget: f.budget,
		Sandbox: f.sandbox, Network: f.network.on(), HostNetwork: f.network.mode == "host", Limits: f.limits.Limits, CommandTimeout: f.cmdTimeout, ScratchQuota: f.scratchQuota,
		Retry: llm.RetryPolicy{MaxAttempts: f.attempts}, Context: f.ctxw, SoftDeadline: f.soft, Timeout: f.timeout,
		Mode: f.mode, Team: f.team, Logger: logger, NewID: func() string { return id }, World: w,
		RequireFinish: f.requireFinish,
		Evidence:      run.EvidenceConfig{Corpus: f.corpus, FetchPrivate: f.fetchPrivate},
	}
	cfg.Team.MergeIgnore = ignoreList(f.mergeIgnore)
	cfg.Team.EffortBudget = f.effortBudget
	if f.effortBudget == 0 {
		cfg.Team.EffortBudget = -1 // no budget
	}
	stop := f.out.startProgress(ctx, dir, 0, stderr)
	stopTelemetry := startTelemetry(ctx, dir, 0, stderr)
	s, err := run.Execute(ctx, cfg)
	stop(s.RunID != "")
	stopTelemetry(s.RunID != "")
	return f.out.finish(s, err, stdout, stderr)
}

// finish prints a run's outcome (the summary, or JSON) and turns it into
// the command's error: nil only when the run completed.
func (o *outputFlags) finish(s run.Summary, err error, stdout, stderr io.Writer) error {
	switch {
	case err != nil && s.RunID == "":
		return err
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

// ignoreList parses --merge-ignore: "none" (or "") is an empty, non-nil
// list, so nothing is left out.
func ignoreList(s string) []string {
	out := []string{}
	if strings.TrimSpace(s) == "none" {
		return out
	}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
