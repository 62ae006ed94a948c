package runflags

import (
	"context"
	"io"
	"log/slog"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/runlog"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/transcript"
)

// Output is the output group of the commands that drive a run.
type Output struct {
	JSON, Quiet, Verbose bool
	LogLevel             string
}

func (o *Output) Register(fs *cmdline.FlagSet) {
	fs.BoolVar(&o.JSON, "json", false, "print a JSON summary on stdout")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress lines on stderr")
	fs.BoolVar(&o.Verbose, "verbose", false, "more progress: commands' whole output (up to 200 lines), observations, board changes, leases, delivery rows")
	fs.StringVar(&o.LogLevel, "log-level", "", "write a log at this level (debug, info, warn, error) to apodex.log in the run directory")
}

func (o *Output) Check() error {
	if o.Quiet && o.Verbose {
		return cmdline.Usagef("--quiet and --verbose contradict each other; give one")
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return err
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	l, err := runlog.ParseLevel(s)
	if err != nil {
		return 0, cmdline.Usagef("%v", err)
	}
	return l, nil
}

// LogFile is the log --log-level writes in a run directory.
const LogFile = runlog.File

// Logger is the run's logger: nil without --log-level; else runlog.New.
func (o *Output) Logger(dir string) (*slog.Logger, func()) {
	if o.LogLevel == "" {
		return nil, func() {}
	}
	lvl, _ := parseLevel(o.LogLevel)
	return runlog.New(dir, lvl)
}

// StartProgress prints the run's progress on w in the background
// (progress.Printer.Start), unless --quiet. On a terminal it draws a status
// line (the model calls in flight) and shows the text the model streams:
// the returned context carries the printer as the clients' llm.TextSink.
func (o *Output) StartProgress(ctx context.Context, dir string, after int64, w io.Writer) (context.Context, func(started bool)) {
	if o.Quiet {
		return ctx, func(bool) {}
	}
	live := progress.Terminal(w)
	// progress cleans what it prints and colours it: it writes raw.
	p := progress.New(termtext.Raw(w), progress.Options{Verbose: o.Verbose, Style: transcript.Style{Color: progress.Colour(w)}, Live: live})
	if live {
		ctx = llm.WithTextSink(ctx, p.Delta)
	}
	return ctx, p.Start(ctx, dir, after)
}
