// Package runcmd is the commands that execute a run in this process:
// apodex run (a new run on an objective, a task file or a world), resume
// (a paused or crashed run, from its record), continue (a new segment of
// a finished run) and replay (re-execute with the recorded model outputs
// and report the first divergence). Flags bind into run.Settings through
// runflags; the outcome's exit code is 0 only for a completed run.
package runcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/world"
)

// loadWorld finds the stored world of --world and its task.
func loadWorld(id, home, task, inputs string) (*world.World, *contract.Contract, error) {
	if task != "" || inputs != "" {
		return nil, nil, errors.New("--world brings its own task and inputs: drop --task and --inputs")
	}
	w, err := world.NewStore(cmdline.HomeDir(home)).Get(id)
	if err != nil {
		return nil, nil, err
	}
	c, err := w.Contract()
	if err != nil {
		return nil, nil, fmt.Errorf("world %s: %w", w.ID, err)
	}
	return w, c, nil
}

func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("run", "[flags] OBJECTIVE   (or - to read it from standard input; or --task task.yaml)", stdout, stderr)
	var f runflags.Flags
	f.Register(fs)
	pos, err := fs.Parse(runflags.JoinNetwork(args))
	if err != nil {
		return err
	}
	given := fs.Given() // before the config fills the rest: a task file's budget beats the config's defaults
	resolved, err := runflags.ApplyConfig(fs, f.Home, f.Model.Profile)
	if err != nil {
		return err
	}
	objective := strings.TrimSpace(strings.Join(pos, " "))
	if len(pos) == 1 && pos[0] == "-" {
		if objective, err = readObjective(cmdline.Stdin(ctx)); err != nil {
			return err
		}
	}
	var c *contract.Contract
	var w *world.World
	switch {
	case f.World != "":
		if w, c, err = loadWorld(f.World, f.Home, f.Task, f.Inputs); err != nil {
			return cmdline.Usagef("%v", err)
		}
		if objective != "" {
			return cmdline.Usagef("--world %s brings its own objective; drop the OBJECTIVE argument", f.World)
		}
		f.ApplyContract(given, c)
	case f.Task != "":
		if c, err = contract.LoadWith(f.Task, contract.Options{AllowOutside: f.AllowOutside}); err != nil {
			return cmdline.Usagef("the task file is not valid:\n%v", err)
		}
		if objective != "" && !f.Override {
			return cmdline.Usagef("--task %s has its own objective; drop the OBJECTIVE argument, or pass --objective-override to replace it", f.Task)
		}
		f.ApplyContract(given, c)
	case f.Override:
		return cmdline.Usagef("--objective-override needs --task")
	case f.AllowOutside:
		return cmdline.Usagef("--allow-outside-task needs --task")
	case objective == "":
		return cmdline.Usagef("no objective: pass what the agent should do, e.g. apodex run --inputs ./data \"Sum the value column of /inputs/data.csv\", or --task task.yaml")
	}
	if f.RepoAll && f.Repo == "" {
		return cmdline.Usagef("--repo-all needs --repo")
	}
	if err := f.Check(); err != nil {
		return cmdline.Usagef("%v", err)
	}
	var named []string
	if c != nil {
		named = c.MCP
	}
	servers, err := runflags.RunMCP(f, resolved.Profile, named)
	if err != nil {
		return err
	}
	model, info, err := f.Model.Build()
	if err != nil {
		return err
	}
	home := cmdline.HomeDir(f.Home)
	id := run.NewID(time.Now())
	dir := filepath.Join(home, "runs", id)
	logger, closeLog := f.Out.Logger(dir)
	defer closeLog()
	if logger != nil {
		model = runflags.LoggedModel(model, logger)
	}
	cfg := run.Config{
		Settings: f.Settings, Home: home, Objective: objective, Contract: c, InputsDir: f.Inputs, CorpusDir: f.Corpus,
		Model: model, ModelInfo: info, Logger: logger, NewID: func() string { return id }, World: w, ReleaseWorld: w != nil, MCP: servers,
		Repo: f.Repo, RepoAll: f.RepoAll, Halt: cmdline.HaltOf(ctx), HaltNote: "Ctrl-C or SIGTERM",
	}
	if !f.NoInstructions {
		if cfg.Instructions, err = runflags.ProjectInstructions(f.InstructionsDir()); err != nil {
			return cmdline.Usagef("%v", err)
		}
	}
	if cfg.Team.EffortBudget == 0 {
		cfg.Team.EffortBudget = -1 // --effort-budget 0: no budget (the record's 0 means the default)
	}
	ctx, progressOn, stop := f.Out.ProgressOnLog(ctx, 0, stderr)
	telemetryOn, stopTelemetry := runflags.TelemetryOnLog(ctx, 0, stderr)
	cfg.OnLog = func(l *record.Log) { progressOn(l); telemetryOn(l) } // both read the log in memory
	s, err := run.Execute(ctx, cfg)
	stop(s.RunID != "")
	stopTelemetry(s.RunID != "")
	return f.Out.Finish(s, err, stdout, stderr)
}

// maxObjective bounds an objective read from standard input.
const maxObjective = 1 << 20

// readObjective reads `apodex run -`'s objective from standard input.
func readObjective(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxObjective+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read the objective from standard input: %w", err)
	case len(b) > maxObjective:
		return "", cmdline.Usagef("the objective on standard input is over %d bytes; put the material in a file under --inputs and say what to do with it", maxObjective)
	case strings.TrimSpace(string(b)) == "":
		return "", cmdline.Usagef("run -: standard input held no objective; pipe one in (echo \"Sum the column\" | apodex run -) or give it as the argument")
	}
	return strings.TrimSpace(string(b)), nil
}
