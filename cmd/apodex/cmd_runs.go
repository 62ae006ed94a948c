package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runinfo"
	"github.com/apodex/apodex/internal/termtext"
)

// Read models with the status people see (a dead process's run is stopped).
var (
	loadInfo   = runinfo.LoadLive
	liveStatus = runinfo.LiveStatus
	listRuns   = runinfo.ListLive
)

// StatusStopped is how a run whose process died without finishing is shown.
const StatusStopped = runinfo.StatusStopped

func cmdRuns(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("runs", "[flags]", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON array")
	status := fs.String("status", "", "only runs with this status: running, stopped, completed or failed")
	limit := fs.Int("limit", 0, "only the newest N runs (0: all)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q; to see one run use `apodex show RUN`", pos[0])
	}
	switch *status {
	case "", run.StatusRunning, StatusStopped, run.StatusCompleted, run.StatusFailed, run.StatusAwaitingReview:
	default:
		return usagef("--status %q: use running, stopped, completed, failed or awaiting_review", *status)
	}
	if *limit < 0 {
		return usagef("--limit must be ≥ 0")
	}
	infos, err := listRuns(homeDir(*home))
	if err != nil {
		return err
	}
	var shown []run.Info
	for _, i := range infos { // newest first
		if *status != "" && i.Status != *status {
			continue
		}
		if *limit > 0 && len(shown) == *limit {
			break
		}
		i.Steps = nil
		shown = append(shown, i)
	}
	if *jsonOut {
		if shown == nil {
			shown = []run.Info{}
		}
		writeJSON(stdout, shown)
		return nil
	}
	if len(shown) == 0 {
		if len(infos) > 0 {
			fmt.Fprintf(stdout, "no %s runs under %s (%d in all)\n", *status, homeDir(*home), len(infos))
		} else {
			fmt.Fprintf(stdout, "no runs under %s\n", homeDir(*home))
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tTERMINATION\tTURNS\tTOOLS\tOBJECTIVE")
	for _, i := range shown {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", i.RunID, i.Status, dash(i.Termination), i.Turns, i.ToolCalls, clip(oneLine(termtext.Clean(i.Objective)), 60))
	}
	tw.Flush()
	return nil
}
