package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runlog"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// outputFlags is the output group of the commands that drive a run.
type outputFlags struct {
	json, quiet, verbose bool
	logLevel             string
}

func (o *outputFlags) register(fs *flagSet) {
	fs.BoolVar(&o.json, "json", false, "print a JSON summary on stdout")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.BoolVar(&o.verbose, "verbose", false, "more progress: commands' whole output (up to 200 lines), observations, board changes, leases, delivery rows")
	fs.StringVar(&o.logLevel, "log-level", "", "write a log at this level (debug, info, warn, error) to apodex.log in the run directory")
}

func (o *outputFlags) check() error {
	if o.quiet && o.verbose {
		return usagef("--quiet and --verbose contradict each other; give one")
	}
	if _, err := parseLevel(o.logLevel); err != nil {
		return err
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	l, err := runlog.ParseLevel(s)
	if err != nil {
		return 0, usagef("%v", err)
	}
	return l, nil
}

// LogFile is the log --log-level writes in a run directory.
const LogFile = runlog.File

// logger is the run's logger: nil without --log-level; else runlog.New.
func (o *outputFlags) logger(dir string) (*slog.Logger, func()) {
	if o.logLevel == "" {
		return nil, func() {}
	}
	lvl, _ := parseLevel(o.logLevel)
	return runlog.New(dir, lvl)
}

// startProgress prints the run's progress on w in the background
// (progress.Printer.Start), unless --quiet. On a terminal it draws a status
// line (the model calls in flight) and shows the text the model streams:
// the returned context carries the printer as the clients' llm.TextSink.
func (o *outputFlags) startProgress(ctx context.Context, dir string, after int64, w io.Writer) (context.Context, func(started bool)) {
	if o.quiet {
		return ctx, func(bool) {}
	}
	live := progress.Terminal(w)
	// progress cleans what it prints and colours it: it writes raw.
	p := progress.New(termtext.Raw(w), progress.Options{Verbose: o.verbose, Style: transcript.Style{Color: progress.Colour(w)}, Live: live})
	if live {
		ctx = llm.WithTextSink(ctx, p.Delta)
	}
	return ctx, p.Start(ctx, dir, after)
}

// writeJSON prints v as indented JSON, exactly: JSON escapes controls itself.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(termtext.Raw(w))
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// recordExists reports whether dir holds a record.
func recordExists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, record.EventsFile))
	return err == nil
}
