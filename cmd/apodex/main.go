// Package main is apodex, the Apodex agent runtime's CLI: it runs an agent against a
// model endpoint and a workspace, and reads the records runs leave behind.
//
// Exit codes: 0 the run completed; 1 it ended without completing (or a
// lookup failed); 2 usage or configuration error (a bad flag, an unknown
// run id, a provider without its key). Every error is one line on stderr
// that says what to do; cmdline.CodeOf is the only place errors become codes.
//
// Each command is one function and one line in commands(): the reading
// commands in cmd_NAME.go here, the others in the packages of
// internal/cmdline (runcmd, livecmd, evalcmd, treecmd); flags shared by commands
// are groups (home, model, output) registered in one call.
//
// Run hands every command stdout and stderr wrapped in termtext.Writer, so
// text from a model, a command or a file never reaches a terminal raw. The
// few outputs that must stay exact (JSON: cmdline.WriteJSON, log --json, board
// --json, export) or that colour their own cleaned parts (log, progress,
// doctor) write to termtext.Raw of them.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/evalcmd"
	"github.com/apodex/apodex/internal/cmdline/livecmd"
	"github.com/apodex/apodex/internal/cmdline/runcmd"
	"github.com/apodex/apodex/internal/cmdline/treecmd"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/version"
)

func main() {
	ctx, stop := cmdline.SignalContext(context.Background(), os.Stderr)
	code := Run(cmdline.WithStdin(ctx, os.Stdin), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	atExit()
	os.Exit(code)
}

// atExit runs just before the process exits (a profiling build sets it).
var atExit = func() {}

// command is one subcommand. run returns nil for success; see cmdline.CodeOf for
// what the other errors mean.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run an agent on an objective", runcmd.Run},
		{"runs", "list runs (eval rollouts with --all); filter by --status, --kind, --since, --eval", cmdRuns},
		{"rm", "remove runs: each run's directory (a live run is refused)", cmdRm},
		{"prune", "remove the runs older than an age: prune --older-than 30d [--keep-failed] (live runs are kept)", cmdPrune},
		{"show", "summarize one run from its record", cmdShow},
		{"log", "the transcript of a run: assistant text, tool calls and output, messages, controls, delivery", cmdLog},
		{"board", "print a team run's task board and assignments", cmdBoard},
		{"verify", "rerun a run's task verifier on its final state", cmdVerify},
		{"evidence", "list a run's evidence ids (Q): kind, source, span, and where each was cited", cmdEvidence},
		{"grade", "grade a run's process by the HDS6 rubric (mapper, judge, reviewer, arbiter); writes RUN/grade.json", cmdGrade},
		{"export", "export runs or evals as training data: chat JSONL, ATIF v1.7 or the native archive, with filters", evalcmd.Export},
		{"pivot", "find where a failed run parted from its successful siblings (JSON for an RL trainer)", cmdPivot},
		{"claims", "print a team run's claim ledger: claims, evidence, artifacts, verdicts, statuses, load-bearing flags", cmdClaims},
		{"review", "decide a run awaiting review (a human clause): --approve or --reject, with --note", livecmd.Review},
		{"diff", "print what a run on a tree (run --repo) changed, as a unified diff in git's format", treecmd.Diff},
		{"apply", "apply a run's change to its tree (or --to DIR): all or nothing, refusing files changed there since", treecmd.Apply},
		{"workspace", "say how a run's final /workspace is kept (a world rollout keeps only its changes) and write it whole: workspace --to DIR RUN", treecmd.Workspace},
		{"replay", "re-execute a finished run with its recorded model outputs and report the first divergence", runcmd.Replay},
		{"say", "send a message to a live run (or update / withdraw one, or change its budget)", livecmd.Say},
		{"attach", "follow a live run's progress, and send it what you type: messages, /pause, /resume, /cancel, /budget", livecmd.Attach},
		{"messages", "list a run's messages and their state", livecmd.Messages},
		{"serve", "serve the HTTP API and a live page of the runs: board, timeline, files, evidence, interventions", cmdServe},
		{"status", "a run's progress, from its board and record", cmdStatus},
		{"pause", "stop a live run's model calls until resume", livecmd.Control("pause")},
		{"resume", "continue a run: a paused one goes on; one whose process died (kill -9, crash) is resumed from its record", runcmd.Resume},
		{"continue", "start a new segment of a finished run with a follow-up: same workspace, history and settings", runcmd.Continue},
		{"cancel", "end a live run (termination cancelled; delivered outputs kept)", livecmd.Control("cancel")},
		{"eval", "run a suite of world rollouts and score them (eval SUITE.yaml, eval show ID, eval resume ID)", evalcmd.Eval},
		{"worker", "run the rollouts of evals queued on NATS JetStream (worker --nats URL)", evalcmd.Worker},
		{"worlds", "build, list, show, check and generate worlds (immutable, content-addressed tasks)", evalcmd.Worlds},
		{"config", "print the effective settings and where each came from (config show)", cmdConfig},
		{"mcp", "MCP servers: list the configured ones with their state and tools (mcp list); serve Apodex's runs as MCP tools (mcp serve)", cmdMCP},
		{"doctor", "check the sandbox, the tools agents use, the home directory and a model endpoint", cmdDoctor},
		{"completion", "print a shell completion script: bash, zsh or fish", cmdCompletion},
		{"help", "print a command's help: apodex help COMMAND", cmdHelp},
		{"version", "print the version", cmdVersion},
	}
}

// legacy adapts a command that returns its exit code itself.
func legacy(f func(context.Context, []string, io.Writer, io.Writer) int) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if code := f(ctx, args, stdout, stderr); code != cmdline.ExitOK {
			return cmdline.ExitError(code)
		}
		return nil
	}
}

// Run is the whole CLI; main only adds the process around it.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	globals, args, err := leadingGlobals(args)
	if err != nil {
		fmt.Fprintf(termtext.NewWriter(stderr), "apodex: %v\n", err)
		return cmdline.ExitUsage
	}
	if len(args) == 0 {
		usage(stdout)
		return cmdline.ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "--help":
		usage(stdout)
		return cmdline.ExitOK
	case "--version":
		name = "version"
	}
	stdout, stderr = termtext.NewWriter(stdout), termtext.NewWriter(stderr)
	if name == "__complete" { // the completion scripts' helper; not a command people type
		cmdComplete(args[1:], stdout)
		return cmdline.ExitOK
	}
	c, ok := lookup(name)
	switch {
	case !ok && strings.HasPrefix(name, "-"):
		fmt.Fprintf(stderr, "apodex: %s before the command: only --home, --profile and --log-level may come before it; put the others after the command\n", name)
		return cmdline.ExitUsage
	case !ok:
		fmt.Fprintf(stderr, "apodex: unknown command %q; run `apodex --help` for the list\n", name)
		return cmdline.ExitUsage
	}
	rest := args[1:]
	if len(globals) > 0 {
		if err := takesGlobals(c, rest, globals); err != nil {
			fmt.Fprintf(stderr, "apodex %s: %v\n", c.name, err)
			return cmdline.ExitUsage
		}
		// After the subcommand and the arguments (flags may follow them),
		// before a "--" that ends the flags.
		at := slices.Index(rest, "--")
		if at < 0 {
			at = len(rest)
		}
		rest = slices.Concat(rest[:at], globals, rest[at:])
	}
	err = c.run(ctx, rest, stdout, stderr)
	code := cmdline.CodeOf(err)
	if msg := cmdline.ErrorLine(err); msg != "" {
		fmt.Fprintf(stderr, "apodex %s: %s\n", c.name, msg)
	}
	return code
}

// globalFlags may come before the command (apodex --home H log RUN): they
// are handed to the command as its own flags.
var globalFlags = []string{"home", "profile", "log-level"}

// leadingGlobals takes the global flags before the command off args, as
// "--name=value" for the command.
func leadingGlobals(args []string) (globals, rest []string, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !slices.Contains(globalFlags, name) {
			if len(globals) == 0 && slices.Contains([]string{"-h", "--help", "--version"}, args[0]) { // Run's own
				return nil, args, nil
			}
			return nil, nil, cmdline.Usagef("%s before the command: only --home, --profile and --log-level may come before it; put the others after the command", args[0])
		}
		args = args[1:]
		if !hasValue {
			if len(args) == 0 {
				return nil, nil, cmdline.Usagef("--%s needs a value", name)
			}
			value, args = args[0], args[1:]
		}
		globals = append(globals, "--"+name+"="+value)
	}
	return globals, args, nil
}

// takesGlobals refuses a global flag the command does not have, naming
// the commands that do.
func takesGlobals(c command, args, globals []string) error {
	sub := ""
	if len(args) > 0 && slices.Contains(subcommands[c.name], args[0]) {
		sub = args[0]
	}
	has := flagsOf(c, sub)
	for _, g := range globals {
		name, _, _ := strings.Cut(g, "=")
		if slices.Contains(has, name) {
			continue
		}
		var which []string
		for _, o := range commands() {
			if slices.Contains(flagsOf(o, ""), name) {
				which = append(which, o.name)
			}
		}
		return cmdline.Usagef("%s does not apply to `apodex %s` (it does to: %s)", name, strings.TrimSpace(c.name+" "+sub), strings.Join(which, ", "))
	}
	return nil
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "apodex: an agent runtime that turns an objective into files, with a replayable record.")
	fmt.Fprintln(w, "\nUsage: apodex COMMAND [flags] [args]   (--home, --profile and --log-level may also come before COMMAND)\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `apodex help COMMAND` (or `apodex COMMAND --help`) for a command's flags.")
	fmt.Fprintln(w, "A run id may be a unique prefix of one, or `latest`.")
	fmt.Fprintln(w, "Exit codes: 0 completed, 1 ended without completing, 2 usage or configuration error.")
}

// cmdHelp prints what `apodex CMD --help` prints, by asking CMD itself.
func cmdHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" {
		name = "help"
	}
	c, ok := lookup(name)
	if !ok {
		return cmdline.Usagef("unknown command %q; run `apodex --help` for the list", args[0])
	}
	if c.name == "help" {
		fmt.Fprintln(stdout, "Usage: apodex help COMMAND\n\nPrints the command's flags, exactly as `apodex COMMAND --help` does.")
		return nil
	}
	return c.run(ctx, []string{"--help"}, stdout, stderr)
}

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("version", "", stdout, stderr)
	if _, err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "apodex", version.Runtime)
	return nil
}

// Text helpers shared by the commands' tables.
var (
	oneLine = runview.OneLine
	dash    = runview.Dash
	clip    = runview.Clip
	short   = runview.Short
)
