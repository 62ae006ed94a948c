package runflags

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/record"
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

// ProgressOnLog prints the progress of the run this process executes on w,
// unless --quiet: onLog (set it as run.Config.OnLog) starts the printer on
// the run's own log, so it reads each event as it is appended
// (progress.Printer.StartLog), never polling events.jsonl; stop(started)
// waits for its end. On a terminal it draws a status line (the model calls
// in flight) and shows the text the model streams: the returned context
// carries the printer as the clients' llm.TextSink.
func (o *Output) ProgressOnLog(ctx context.Context, after int64, w io.Writer) (_ context.Context, onLog func(*record.Log), stop func(started bool)) {
	if o.Quiet {
		return ctx, func(*record.Log) {}, func(bool) {}
	}
	live := progress.Terminal(w)
	p := progress.New(termtext.Raw(w), progress.Options{Verbose: o.Verbose, Style: transcript.Style{Color: progress.Colour(w)}, Live: live})
	if live {
		ctx = llm.WithTextSink(ctx, p.Delta)
	}
	var s onLogStop
	return ctx, func(l *record.Log) { s.set(p.StartLog(ctx, l, after)) }, s.stop
}

// onLogStop is the stop of what a run's OnLog started, if it did.
type onLogStop struct {
	mu sync.Mutex
	f  func(started bool)
}

func (s *onLogStop) set(f func(started bool)) {
	s.mu.Lock()
	s.f = f
	s.mu.Unlock()
}

func (s *onLogStop) stop(started bool) {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f != nil {
		f(started)
	}
}
