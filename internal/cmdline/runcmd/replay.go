package runcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/replay"
	"github.com/apodex/apodex/internal/runview"
)

// Replay re-executes a finished run with its recorded model outputs and
// reports whether it did the same (R-REC-2). Exit 0: identical (differences
// in nondeterministic output only, if any); 1: divergences of class
// environment or policy (or the run could not be found or replayed); 2:
// usage.
func Replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("replay", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("the replay report as JSON")
	keep := fs.Bool("keep", false, "keep the replay's run directory and print where it is")
	progress := fs.Bool("progress", false, "print the replay's steps on stderr")
	sbx := runflags.SandboxOverride(fs, "replay")
	allow := runflags.NetworkAllowOverride(fs, "replay")
	var wait time.Duration
	cmdline.DurationFlag(fs, &wait, "order-wait", 10*time.Second, "how long a turn waits for the recorded order of the agents' effects")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if err := runflags.CheckSandboxOverride(*sbx); err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.Usagef("give one run id (see `apodex runs`; `latest` is the newest)")
	}
	dir, err := cmdline.FindRun(*home, pos[0])
	if err != nil {
		return err
	}
	rc := replay.Config{Keep: *keep, OrderWait: wait, Sandbox: *sbx, NetworkAllow: *allow}
	if *progress {
		rc.Progress = stderr
	}
	rep, err := replay.Run(ctx, dir, rc)
	if err != nil {
		return err
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, rep)
	} else {
		printReplay(stdout, stderr, rep)
	}
	if !rep.Identical {
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}

// maxPrinted bounds the divergences printed; --json lists them all.
const maxPrinted = 20

// printReplay prints "identical" alone on stdout, or every divergence with
// its class and a count by class; the counts of what was compared, the
// differences in nondeterministic output only and the notes go to stderr.
func printReplay(stdout, stderr io.Writer, rep replay.Report) {
	var shown, noise int
	for _, d := range rep.Divergences {
		if d.Class == replay.ClassNoise {
			noise++
			continue
		}
		if shown++; shown > maxPrinted {
			continue
		}
		where := fmt.Sprintf("seq %d", d.Seq)
		if d.After {
			where = fmt.Sprintf("after seq %d", d.Seq)
		}
		if d.Agent != "" {
			where += ", agent " + d.Agent
		}
		fmt.Fprintf(stdout, "divergence at %s: %s %s (%s)\n", where, d.Class, d.Kind, runview.OneLine(d.What))
		fmt.Fprintf(stdout, "  expected: %s\n", runview.OneLine(d.Expected))
		fmt.Fprintf(stdout, "  got:      %s\n", runview.OneLine(d.Got))
	}
	if rep.Identical {
		fmt.Fprintln(stdout, "identical")
	} else {
		if shown > maxPrinted {
			fmt.Fprintf(stdout, "… and %d more (--json lists them all)\n", shown-maxPrinted)
		}
		var parts []string
		for _, c := range []string{replay.ClassPolicy, replay.ClassEnvironment} {
			if n := rep.Classes[c]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, c))
			}
		}
		noun := "divergences"
		if shown == 1 {
			noun = "divergence"
		}
		fmt.Fprintf(stdout, "%d %s: %s\n", shown, noun, strings.Join(parts, ", "))
	}
	c := rep.Compared
	fmt.Fprintf(stderr, "replayed run %s (%d events) in %s: compared %d tool calls, %d observations, %d file changes, %d final files\n",
		rep.RunID, rep.Events, runview.Short(time.Duration(rep.DurationMS)*time.Millisecond), c.ToolCalls, c.Observations, c.FileChanges, c.FinalFiles)
	if noise > 0 {
		fmt.Fprintf(stderr, "%d observations differed only in %s (file times, inode numbers, clock times, line order): normalized, not divergences\n", noise, replay.ClassNoise)
		for _, d := range rep.Divergences {
			if d.Class == replay.ClassNoise {
				fmt.Fprintf(stderr, "  seq %d, agent %s: %s\n", d.Seq, d.Agent, runview.OneLine(d.What))
			}
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	if rep.ReplayDir != "" {
		fmt.Fprintf(stderr, "replay kept in %s\n", rep.ReplayDir)
	}
}
