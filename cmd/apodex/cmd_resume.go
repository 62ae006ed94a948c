package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/run"
)

// cmdResume resumes a run: a live, paused run is let go on (a control
// message); a run whose process stopped without finishing (kill -9, crash,
// power loss) is continued from its record in this process.
func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("resume", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	var mf modelFlags
	mf.register(fs)
	jsonOut := fs.Bool("json", false, "print a JSON summary on stdout (stopped runs)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	dir, code, ok := fs.oneRun(args, home)
	if !ok {
		return code
	}
	switch run.Liveness(dir) {
	case run.Finished:
		info, err := run.Load(dir)
		if err != nil {
			fmt.Fprintf(stderr, "apodex resume: run %s cannot be read: %v\n", filepath.Base(dir), err)
			return exitFailed
		}
		fmt.Fprintf(stderr, "apodex resume: run %s has finished (%s, %s); there is nothing to resume\n", info.RunID, info.Status, info.Termination)
		return exitFailed
	case run.Live:
		if err := inbox.Control(dir, inbox.ControlResume, nil); err != nil {
			fmt.Fprintf(stderr, "apodex resume: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "resume sent to %s\n", filepath.Base(dir))
		return exitOK
	}
	rec, err := run.ReadStarted(dir)
	if err != nil {
		fmt.Fprintf(stderr, "apodex resume: %v\n", err)
		return exitFailed
	}
	model, info, err := mf.fromRecord(dir, rec.Started.Model)
	if err != nil {
		fmt.Fprintf(stderr, "apodex resume: %v\n", err)
		return exitUsage
	}
	rc := run.ResumeConfig{Config: run.Config{Model: model, ModelInfo: info, Retry: llm.RetryPolicy{}}}
	if !*quiet {
		rc.Progress = stderr
	}
	s, err := run.Resume(ctx, dir, rc)
	var cerr *run.ConfigError
	switch {
	case errors.As(err, &cerr):
		fmt.Fprintf(stderr, "apodex resume: %v\n", err)
		return exitUsage
	case err != nil && s.RunID == "":
		fmt.Fprintf(stderr, "apodex resume: %v\n", err)
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "apodex resume: %v\n", err)
	}
	if *jsonOut {
		writeJSON(stdout, s)
	} else {
		printSummary(stdout, s)
	}
	if s.Status != run.StatusCompleted {
		return exitFailed
	}
	return exitOK
}
