package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apodex/apodex/internal/replay"
)

// cmdReplay re-executes a finished run with its recorded model outputs and
// reports whether it did the same (R-REC-2). Exit 0: identical; 1: a
// divergence (or the run could not be found or replayed); 2: usage.
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("the replay report as JSON")
	keep := fs.Bool("keep", false, "keep the replay's run directory and print where it is")
	progress := fs.Bool("progress", false, "print the replay's steps on stderr")
	sbx := sandboxOverride(fs, "replay")
	var wait time.Duration
	durationFlag(fs, &wait, "order-wait", 10*time.Second, "how long a turn waits for the recorded order of the agents' effects")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if err := checkSandboxOverride(*sbx); err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one run id (see `apodex runs`; `latest` is the newest)")
	}
	dir, err := findRun(*home, pos[0])
	if err != nil {
		return err
	}
	rc := replay.Config{Keep: *keep, OrderWait: wait, Sandbox: *sbx}
	if *progress {
		rc.Progress = stderr
	}
	rep, err := replay.Run(ctx, dir, rc)
	if err != nil {
		return err
	}
	if *jsonOut {
		writeJSON(stdout, rep)
	} else {
		printReplay(stdout, stderr, rep)
	}
	if !rep.Identical {
		return exitError(exitFailed)
	}
	return nil
}

// printReplay prints "identical" alone on stdout, or the first divergence;
// the counts and notes go to stderr.
func printReplay(stdout, stderr io.Writer, rep replay.Report) {
	if d := rep.Divergence; d != nil {
		where := fmt.Sprintf("seq %d", d.Seq)
		if d.After {
			where = fmt.Sprintf("after seq %d", d.Seq)
		}
		if d.Agent != "" {
			where += ", agent " + d.Agent
		}
		fmt.Fprintf(stdout, "divergence at %s: %s (%s)\n", where, d.Kind, d.What)
		fmt.Fprintf(stdout, "  expected: %s\n", oneLine(d.Expected))
		fmt.Fprintf(stdout, "  got:      %s\n", oneLine(d.Got))
	} else {
		fmt.Fprintln(stdout, "identical")
	}
	c := rep.Compared
	fmt.Fprintf(stderr, "replayed run %s (%d events) in %s: compared %d tool calls, %d observations, %d file changes, %d final files\n",
		rep.RunID, rep.Events, short(time.Duration(rep.DurationMS)*time.Millisecond), c.ToolCalls, c.Observations, c.FileChanges, c.FinalFiles)
	for _, n := range rep.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	if rep.ReplayDir != "" {
		fmt.Fprintf(stderr, "replay kept in %s\n", rep.ReplayDir)
	}
}
