package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/complete"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
)

// Read models with the status people see (a dead process's run is stopped).
var (
	loadInfo   = runview.LoadLive
	liveStatus = runview.LiveStatus
	listRuns   = runview.ListLive
)

// StatusStopped is how a run whose process died without finishing is shown.
const StatusStopped = runview.StatusStopped

// runStatuses are the statuses --status takes.
var runStatuses = []string{run.StatusRunning, StatusStopped, run.StatusCompleted, run.StatusFailed, run.StatusAwaitingReview}

// runKinds are the kinds --kind takes: the mode, a rollout of a stored
// world, or an eval's rollout.
var runKinds = []string{run.ModeReact, run.ModeTeam, "world", "eval"}

// runFilter is which runs a listing (runs, prune) takes.
type runFilter struct {
	all           bool
	evalID        string
	status, kind  string
	since, before time.Time
}

// register adds the filter's flags; prune has its own age flag.
func (f *runFilter) register(fs *cmdline.FlagSet, listing bool) {
	fs.BoolVar(&f.all, "all", false, "also the rollouts of evals (hidden otherwise: apodex eval makes many)")
	fs.StringVar(&f.evalID, "eval", "", "only the rollouts of this eval (an id from ls ~/.apodex/evals, or a unique prefix)")
	fs.StringVar(&f.status, "status", "", "only runs with this status")
	fs.Choices("status", runStatuses...)
	fs.StringVar(&f.kind, "kind", "", "only runs of this kind: react or team (the mode), world (a rollout of a stored world), eval (an eval's rollout)")
	fs.Choices("kind", runKinds...)
	if listing {
		fs.Func("since", "only runs started since then: an age (7d, 12h, 2w) or a date (2026-01-31)", func(s string) error {
			t, err := parseSince(s, time.Now())
			f.since = t
			return err
		})
		fs.Meta("since", "AGE|DATE")
	}
}

// check validates the filter; rollouts maps run ids to their evals.
func (f *runFilter) check(home string) error {
	if f.status != "" && !slices.Contains(runStatuses, f.status) {
		return cmdline.Usagef("--status %q: use %s", f.status, orList(runStatuses))
	}
	if f.kind != "" && !slices.Contains(runKinds, f.kind) {
		return cmdline.Usagef("--kind %q: use %s", f.kind, orList(runKinds))
	}
	if f.evalID != "" {
		id, err := findEval(home, f.evalID)
		if err != nil {
			return err
		}
		f.evalID = id
	}
	return nil
}

// keep reports whether the filter takes run i; rollouts maps run ids to
// their evals.
func (f *runFilter) keep(i runview.Row, rollouts map[string]string) bool {
	ev, rollout := rollouts[i.RunID]
	switch {
	case f.evalID != "" && ev != f.evalID:
		return false
	case rollout && !f.all && f.evalID == "" && f.kind != "eval":
		return false
	case f.status != "" && i.Status != f.status:
		return false
	case !f.since.IsZero() && i.Started.Before(f.since):
		return false
	case !f.before.IsZero() && !i.Started.Before(f.before):
		return false
	}
	switch f.kind {
	case "", i.Mode:
		return true
	case "world":
		return i.World != ""
	case "eval":
		return rollout
	}
	return false
}

func cmdRuns(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("runs", "[flags]", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON array")
	var f runFilter
	f.register(fs, true)
	limit := fs.Int("limit", 0, "only the newest N runs (0: all)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmdline.Usagef("unexpected argument %q; to see one run use `apodex show RUN`", pos[0])
	}
	if *limit < 0 {
		return cmdline.Usagef("--limit must be ≥ 0")
	}
	h := cmdline.HomeDir(*home)
	if err := f.check(h); err != nil {
		return err
	}
	infos, err := listRuns(h)
	if err != nil {
		return err
	}
	rollouts := eval.RolloutRuns(h)
	var shown []runview.Row
	hidden := 0
	for _, i := range infos { // newest first
		if !f.keep(i, rollouts) {
			if _, ok := rollouts[i.RunID]; ok && !f.all && f.evalID == "" {
				hidden++
			}
			continue
		}
		if *limit > 0 && len(shown) == *limit {
			break
		}
		shown = append(shown, i)
	}
	if *jsonOut {
		if shown == nil {
			shown = []runview.Row{}
		}
		cmdline.WriteJSON(stdout, shown)
		return nil
	}
	if len(shown) == 0 {
		if len(infos) > 0 {
			fmt.Fprintf(stdout, "no runs under %s match (%d in all)\n", h, len(infos))
		} else {
			fmt.Fprintf(stdout, "no runs under %s\n", h)
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tSTATUS\tTERMINATION\tMODE\tTURNS\tTOOLS\tOBJECTIVE")
		for _, i := range shown {
			mode := dash(i.Mode)
			if ev, ok := rollouts[i.RunID]; ok {
				mode += " (" + ev + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", i.RunID, i.Status, dash(i.Termination), mode, i.Turns, i.ToolCalls, clip(oneLine(termtext.Clean(i.Objective)), 60))
		}
		tw.Flush()
	}
	if hidden > 0 {
		fmt.Fprintf(stdout, "(%d eval rollouts not shown: --all shows them, --eval ID one eval's)\n", hidden)
	}
	return nil
}

// findEval is the eval id under home that id names (an id or a unique
// prefix).
func findEval(home, id string) (string, error) {
	var match []string
	for _, e := range complete.IDs(complete.Eval, home) {
		if e == id {
			return e, nil
		}
		if strings.HasPrefix(e, id) {
			match = append(match, e)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return "", cmdline.Usagef("no eval %q under %s (evals are listed in %s/evals)", id, home, home)
	}
	return "", cmdline.Usagef("%q matches %d evals; give more of the id", id, len(match))
}

// parseSince reads --since: an age before now (7d, 12h, 2w, 90m) or a
// date (2026-01-31, or RFC 3339).
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := parseAge(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{"2006-01-02", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("use an age like 7d, 12h or 2w, or a date like 2026-01-31")
}

// parseAge reads an age: days (30d), weeks (2w) or a duration (12h, 90m).
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for unit, d := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, unit); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("use an age like 30d, 2w or 12h")
			}
			return time.Duration(v * float64(d)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("use an age like 30d, 2w or 12h")
	}
	return d, nil
}

// orList is "a, b or c".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}
