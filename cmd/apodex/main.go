// Command apodex is the Apodex agent runtime's CLI: it runs an agent against a
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

// parseInterleaved parses flags that may come before or after positional
// arguments ("apodex run OBJECTIVE --json"). A lone "--" ends flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
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

// newFlagSet returns a FlagSet whose errors and help go to stderr and whose
// help starts with the command's synopsis.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("apodex "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: apodex %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// flagExit maps a flag parse error to an exit code: --help is success.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// homeDir is --home, else $APODEX_HOME, else ~/.apodex.
func homeDir(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if h := os.Getenv("APODEX_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".apodex")
	}
	return ".apodex"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
