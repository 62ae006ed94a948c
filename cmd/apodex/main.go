// Package main is apodex, the Apodex agent runtime's CLI: it runs an agent against a
// model endpoint and a workspace, and reads the records runs leave behind.
//
// Exit codes: 0 the run completed; 1 it ended without completing (or a
// lookup failed); 2 usage or configuration error. Every error is one line
// that says what to do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/run"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run an agent on an objective", cmdRun},
		{"runs", "list runs", cmdRuns},
		{"show", "summarize one run from its record", cmdShow},
		{"board", "print a team run's task board and assignments", cmdBoard},
		{"verify", "rerun a run's task verifier on its final state", cmdVerify},
		{"replay", "re-execute a finished run with its recorded model outputs and report the first divergence", cmdReplay},
		{"say", "send a message to a live run (or update / withdraw one, or change its budget)", cmdSay},
		{"messages", "list a run's messages and their state", cmdMessages},
		{"status", "a run's progress, from its board and record", cmdStatus},
		{"pause", "stop a live run's model calls until resume", cmdControl("pause")},
		{"resume", "continue a run: a paused one goes on; one whose process died (kill -9, crash) is resumed from its record", cmdResume},
		{"cancel", "end a live run (termination cancelled; delivered outputs kept)", cmdControl("cancel")},
		{"eval", "run a suite of world rollouts and score them (eval SUITE.yaml, eval show ID, eval resume ID)", cmdEval},
		{"worlds", "build, list, show, check and generate worlds (immutable, content-addressed tasks)", cmdWorlds},
	}
}

// Run is the whole CLI; main only adds the process around it.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "apodex", version())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "apodex: unknown command %q; run `apodex --help` for the list\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "apodex: an agent runtime that turns an objective into files, with a replayable record.")
	fmt.Fprintln(w, "\nUsage: apodex COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  version  print the version")
	fmt.Fprintln(w, "\nRun `apodex COMMAND --help` for a command's flags.")
	fmt.Fprintln(w, "Exit codes: 0 completed, 1 ended without completing, 2 usage or configuration error.")
}

type flagDef = flag.Flag

// flagSet is a command's flags: --help goes to stdout, errors are one line
// on stderr.
type flagSet struct {
	*flag.FlagSet
	stdout, stderr io.Writer
}

func newFlagSet(name, synopsis string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("apodex "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: apodex %s %s\n\nFlags:\n", name, synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses flags that may come before or after positional arguments
// ("apodex run OBJECTIVE --json"). A lone "--" ends flags.
func (fs *flagSet) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if !errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(fs.stderr, "%s: %v; see `%s --help`\n", fs.Name(), err, fs.Name())
			}
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// homeFlag registers --home.
func (fs *flagSet) homeFlag() *string {
	return fs.String("home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
}

// oneRun parses args for a command that takes one run id and finds the run.
// When ok is false the problem was printed and code is the exit code.
func (fs *flagSet) oneRun(args []string, home *string) (dir string, code int, ok bool) {
	pos, err := fs.parse(args)
	if err != nil {
		return "", flagExit(err), false
	}
	if len(pos) != 1 {
		fmt.Fprintf(fs.stderr, "%s: give one run id (see `apodex runs`)\n", fs.Name())
		return "", exitUsage, false
	}
	dir, err = run.Dir(homeDir(*home), pos[0])
	if err != nil {
		fmt.Fprintf(fs.stderr, "%s: %v\n", fs.Name(), err)
		return "", exitFailed, false
	}
	return dir, 0, true
}

// flagExit maps a flag parse error to an exit code: --help is success.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// homeDir is --home, else $APODEX_HOME, else ~/.apodex, made absolute (the
// sandbox binds run directories by absolute path).
func homeDir(flagValue string) string {
	h := flagValue
	if h == "" {
		h = os.Getenv("APODEX_HOME")
	}
	if h == "" {
		if u, err := os.UserHomeDir(); err == nil {
			h = filepath.Join(u, ".apodex")
		} else {
			h = ".apodex"
		}
	}
	if abs, err := filepath.Abs(h); err == nil {
		return abs
	}
	return h
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
