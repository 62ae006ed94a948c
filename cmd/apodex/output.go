package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/progress"
	"github.com/apodex/apodex/internal/record"
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
	fs.BoolVar(&o.verbose, "verbose", false, "more progress: tool calls as they start, observations, board changes, delivery rows")
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
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usagef("--log-level %q: use debug, info, warn or error", s)
}

// LogFile is the log --log-level writes in a run directory.
const LogFile = "apodex.log"

// logger is the run's logger: nil without --log-level; else a JSON log to
// apodex.log in dir, held in memory until the run creates dir (a run that
// never starts leaves no directory behind).
func (o *outputFlags) logger(dir string) (*slog.Logger, func()) {
	if o.logLevel == "" {
		return nil, func() {}
	}
	lvl, _ := parseLevel(o.logLevel)
	w := &dirFile{path: filepath.Join(dir, LogFile)}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), w.close
}

// dirFile appends to path once path's directory exists; before, it buffers.
type dirFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	buf  bytes.Buffer
}

func (d *dirFile) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		if _, err := os.Stat(filepath.Dir(d.path)); err != nil {
			return d.buf.Write(p)
		}
		f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return d.buf.Write(p)
		}
		d.f = f
		d.f.Write(d.buf.Bytes())
		d.buf.Reset()
	}
	return d.f.Write(p)
}

func (d *dirFile) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil && d.buf.Len() > 0 {
		if _, err := os.Stat(filepath.Dir(d.path)); err == nil {
			os.WriteFile(d.path, d.buf.Bytes(), 0o644)
		}
	}
	if d.f != nil {
		d.f.Close()
	}
}

// startProgress prints the run in dir's progress on w from its record,
// after event after, in the background; stop waits for the record's end
// (or a moment, for a run that never started) and returns.
func (o *outputFlags) startProgress(ctx context.Context, dir string, after int64, w io.Writer) (stop func(started bool)) {
	if o.quiet {
		return func(bool) {}
	}
	// Not ended by Ctrl-C: the run records how it ended, and that is worth
	// printing; stop ends the follower.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var err error
	opt := progress.Options{Verbose: o.verbose, Style: transcript.Style{Color: progress.Colour(w)}}
	go func() {
		defer close(done)
		err = progress.Follow(ctx, dir, after, w, opt)
	}()
	return func(started bool) {
		if started {
			select { // the record ends with run_finished: Follow ends by itself
			case <-done:
			case <-time.After(5 * time.Second):
			}
		}
		cancel()
		<-done
		if err != nil && started { // a run that never started has no record to follow
			fmt.Fprintf(w, "apodex: progress stopped: %v\n", err)
		}
	}
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// recordExists reports whether dir holds a record.
func recordExists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, record.EventsFile))
	return err == nil
}
