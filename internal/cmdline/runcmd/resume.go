package runcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
)

// Resume resumes a run: a live, paused run is let go on (a control
// message); a run whose process stopped without finishing (kill -9, crash,
// power loss) is continued from its record in this process.
func Resume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("resume", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	var mf runflags.Model
	mf.Register(fs)
	var out runflags.Output
	out.Register(fs)
	sbx := runflags.SandboxOverride(fs, "resume")
	allow := runflags.NetworkAllowOverride(fs, "resume")
	mcpConfig := runflags.MCPConfigFlag(fs)
	budget := fs.String("budget", "", "change budgets before going on, one or more KEY=VALUE as with say --budget: turns=+10 tool_calls=+50 tokens=400000 deadline=+10m")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	var change map[string]string
	if *budget != "" {
		_, b, _, err := inbox.BudgetArgs(append(strings.Fields(*budget), filepath.Base(dir)))
		if err != nil {
			return cmdline.Usagef("--budget: %v", err)
		}
		change = b
	}
	if err := out.Check(); err != nil {
		return err
	}
	if err := runflags.CheckSandboxOverride(*sbx); err != nil {
		return err
	}
	switch runview.Liveness(dir) {
	case runview.Finished:
		if _, ok := run.ResumableEnd(dir); ok {
			break // a model error: the run goes on from where it was
		}
		info, err := runview.Load(dir)
		if err != nil {
			return fmt.Errorf("run %s cannot be read: %w", filepath.Base(dir), err)
		}
		return fmt.Errorf("run %s has finished (%s, %s); there is nothing to resume", info.RunID, info.Status, info.Termination)
	case runview.Live:
		if err := inbox.Control(dir, inbox.ControlResume, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "resume sent to %s\n", filepath.Base(dir))
		return nil
	}
	return goOn(ctx, dir, *home, *mcpConfig, &mf, &out, *sbx, *allow, change, "", stdout, stderr)
}

// goOn resumes the run in dir in this process — or, with a follow-up,
// continues it (run.Continue) — after queueing a budget change.
func goOn(ctx context.Context, dir, home, mcpConfig string, mf *runflags.Model, out *runflags.Output, sbx string, allow []string, change map[string]string, followUp string, stdout, stderr io.Writer) error {
	if change != nil { // queued: the run applies it before its next model call
		if err := inbox.Control(dir, inbox.ControlBudget, change); err != nil {
			return err
		}
	}
	rec, err := run.ReadStarted(dir)
	if err != nil {
		return err
	}
	model, info, err := mf.FromRecord(dir, segmentModel(dir, rec.Started.Model))
	if err != nil {
		return err
	}
	logger, closeLog := out.Logger(dir)
	defer closeLog()
	if logger != nil {
		model = runflags.LoggedModel(model, logger)
	}
	var after int64
	if last, err := record.Last(dir); err == nil {
		after = last.Seq
	}
	var servers []config.MCPServer
	if rec.Settings.MCP != nil { // the run's servers start again, from the configuration here
		all, err := runflags.MCPServers(home, mf.Profile, mcpConfig)
		if err != nil {
			return err
		}
		for _, s := range all {
			servers = append(servers, s)
		}
	}
	rc := run.ResumeConfig{Config: run.Config{Model: model, ModelInfo: info, Logger: logger, MCP: servers, Halt: cmdline.HaltOf(ctx), HaltNote: "Ctrl-C or SIGTERM"}, Sandbox: sbx, NetworkAllow: allow}
	ctx, progressOn, stop := out.ProgressOnLog(ctx, after, stderr)
	telemetryOn, stopTelemetry := runflags.TelemetryOnLog(ctx, after, stderr)
	rc.OnLog = func(l *record.Log) { progressOn(l); telemetryOn(l) } // both read the log in memory
	var s run.Summary
	if followUp != "" {
		s, err = run.Continue(ctx, dir, followUp, rc)
	} else {
		s, err = run.Resume(ctx, dir, rc)
	}
	stop(s.RunID != "")
	stopTelemetry(s.RunID != "")
	return out.Finish(s, err, stdout, stderr)
}

// segmentModel is the model the run's latest segment called: the last
// resume's (a --base-url given then holds), else run_started's.
func segmentModel(dir string, started record.ModelSettings) record.ModelSettings {
	c, err := record.Read(dir)
	if err != nil {
		return started
	}
	m := started
	for _, e := range c.Events {
		p, _ := record.DecodePayload(e)
		if r, ok := p.(*record.Resumed); ok && r.Model != nil {
			m = *r.Model
		}
	}
	return m
}
