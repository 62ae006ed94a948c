package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/livecmd"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// cmdLog prints a run's transcript (see package transcript).
func cmdLog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("log", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("the same entries as JSON lines, one object per line")
	full := fs.Bool("full", false, "whole tool outputs (from the blobs, also what was clipped for the model) and whole arguments")
	follow := fs.Bool("follow", false, "stream a live run as it goes; ends when the run ends")
	agent := fs.String("agent", "", "only this agent's entries (main, lead, A1, …)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	opt := transcript.Options{Full: *full, Dir: dir}
	// JSON lines stay exact (termtext.JSON escapes only what a terminal
	// would act on); the transcript cleans and colours its own text.
	raw := termtext.Raw(stdout)
	tw := &transcript.Writer{W: raw, Full: *full, Style: transcript.Style{Color: !*jsonOut && progress.Colour(stdout)}}
	jsonW := termtext.JSON(stdout)
	emit := func(x transcript.Entry) {
		if *jsonOut {
			b, _ := json.Marshal(x)
			fmt.Fprintf(jsonW, "%s\n", b)
		} else {
			tw.Write(x)
		}
	}
	// With --agent, a resume stays: it is a note in the agent's section.
	keep := func(x transcript.Entry) bool {
		return *agent == "" || x.Agent == *agent || x.Kind == transcript.KindResumed
	}
	if *follow {
		return followLog(ctx, dir, func(e record.Event) {
			for _, x := range transcript.Entries(e, opt) {
				if keep(x) {
					emit(x)
				}
			}
		}, stderr)
	}
	c, err := record.Read(dir)
	if err != nil {
		return err
	}
	var all []transcript.Entry
	for _, e := range c.Events {
		all = append(all, transcript.Entries(e, opt)...)
	}
	all = unanswered(dir, all)
	if *agent != "" {
		agents := transcript.Agents(all)
		if !slices.Contains(agents, *agent) {
			return cmdline.Usagef("run %s has no agent %q; its agents: %s", filepath.Base(dir), *agent, strings.Join(agents, ", "))
		}
		all = slices.DeleteFunc(all, func(x transcript.Entry) bool { return !keep(x) })
	}
	if !*jsonOut {
		all = transcript.ByAgent(all)
	}
	for _, x := range all {
		emit(x)
	}
	if c.TornTail {
		fmt.Fprintln(stderr, "apodex log: the record's last line is torn (the process was killed mid-write); `apodex resume` repairs it")
	}
	return nil
}

// unanswered marks the calls without a result by how the run in dir
// stands: still running, or cut off by a stop nothing resumed yet.
func unanswered(dir string, all []transcript.Entry) []transcript.Entry {
	switch runview.Liveness(dir) {
	case runview.Live:
		return transcript.Unanswered(all, transcript.KindRunning, "no result yet: the call is running")
	case runview.Stopped:
		return transcript.Unanswered(all, transcript.KindInterrupted, "interrupted: the process stopped while this call ran; `apodex resume` continues the run")
	}
	return transcript.Unanswered(all, transcript.KindInterrupted, "interrupted: the run ended while this call ran")
}

// followLog calls each for every event of the run in dir as it lands, until
// the run finishes, its process dies, or ctx ends.
func followLog(ctx context.Context, dir string, each func(record.Event), stderr io.Writer) error {
	ctx, stopped, cancel := livecmd.UntilStopped(ctx, dir)
	defer cancel()
	for e, err := range record.Follow(ctx, dir, 0) {
		if err != nil {
			return err
		}
		each(e)
	}
	if stopped() {
		fmt.Fprintf(stderr, "apodex log: the run is not running and did not finish (its process stopped); `apodex resume` continues it\n")
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}
