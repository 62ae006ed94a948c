// Package evalcmd is the commands of datasets and evaluation: apodex
// worlds (build, list, show, check, gen), eval (a suite of world rollouts,
// locally or queued on NATS JetStream), worker (the rollouts of queued
// evals) and export (runs and evals as training data). Each command is a
// function with the signature of the command table in cmd/apodex; errors
// map to exit codes through cmdline.CodeOf.
package evalcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/eval/chart"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
)

// Eval is `apodex eval SUITE.yaml`, `eval show ID`, `eval resume ID`.
func Eval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "show":
			return evalShow(args[1:], stdout, stderr)
		case "resume":
			return evalRun(ctx, "resume", args[1:], stdout, stderr)
		}
	}
	return evalRun(ctx, "", args, stdout, stderr)
}

func evalRun(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	name, synopsis := "eval", "SUITE.yaml [--parallel P]   (also: eval show ID, eval resume ID)"
	if sub != "" {
		name, synopsis = "eval resume", "ID [--parallel P]"
	}
	fs := cmdline.NewFlagSet(name, synopsis, stdout, stderr)
	home := fs.HomeFlag()
	parallel := fs.Int("parallel", runtime.NumCPU(), "rollouts at once")
	sbx := fs.String("sandbox", sandbox.KindAuto, "auto (bwrap if usable, else native), bwrap, native, or none (no isolation: only with models you trust with this machine)")
	fs.Choices("sandbox", "auto", "bwrap", "native", "none")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	natsFlag := fs.String("nats", "", "queue the rollouts on NATS JetStream for `apodex worker`s: a URL, or embedded (a server in this process on port 4222, or embedded:PORT); default $APODEX_NATS_URL, else the config key nats")
	wait := fs.Bool("wait", false, "with --nats: wait for every result (always so with embedded)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.Usagef("give one %s", map[string]string{"": "suite file (see examples/suite/suite.yaml)", "resume": "eval id"}[sub])
	}
	if *parallel < 1 {
		return cmdline.Usagef("need --parallel ≥ 1")
	}
	if *sbx != "none" {
		if _, err := sandbox.New(*sbx); err != nil {
			return cmdline.Usagef("--sandbox %s: %v; pass --sandbox auto, or none to run without isolation", *sbx, err)
		}
	}
	opts := eval.Options{Home: cmdline.HomeDir(*home), Parallel: *parallel, Sandbox: *sbx, NewModel: evalModel}
	if !*quiet {
		opts.Progress = stderr
	}
	if url, err := natsURL(*natsFlag, opts.Home); err != nil {
		return err
	} else if url != "" {
		return evalQueued(ctx, sub, pos[0], url, *wait, opts, stdout, stderr)
	}
	var id string
	if sub == "resume" {
		id = pos[0]
		err = eval.Resume(ctx, id, opts)
	} else {
		s, lerr := eval.LoadSuite(pos[0])
		if lerr != nil {
			return cmdline.Usagef("%v", lerr)
		}
		id, err = eval.Start(ctx, s, opts)
	}
	if id != "" {
		fmt.Fprintf(stdout, "eval %s: results in %s/results.jsonl; see `apodex eval show %s`\n", id, eval.Dir(opts.Home, id), id)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("stopped; `apodex eval resume %s` runs what is missing", id)
	case err != nil:
		return err
	}
	return nil
}

// evalModel builds a configuration's model the way `apodex run` does;
// provider "oracle" plays the world's reference solution.
func evalModel(c eval.Config, w *world.World) (llm.Model, record.ModelSettings, error) {
	if c.Provider == "oracle" {
		return eval.Oracle(w)
	}
	m := runflags.Model{Provider: c.Provider, Name: c.Model, BaseURL: c.BaseURL, Script: c.Script}
	return m.Build()
}

func evalShow(args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("eval show", "ID [--json] [--plot FILE.png]", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.Bool("json", false, "print JSON")
	plot := fs.String("plot", "", "write a PNG of pass rate against tokens per configuration, with 95% intervals")
	natsFlag := fs.String("nats", "", "also list the workers and rollouts in flight of an eval queued there (default $APODEX_NATS_URL, else the config key nats)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.Usagef("give one eval id")
	}
	h := cmdline.HomeDir(*home)
	url, err := natsURL(*natsFlag, h)
	if err != nil {
		return err
	}
	if url != "" { // an eval queued from another host is fetched here first
		if err := syncQueued(context.Background(), url, h, pos[0]); err != nil {
			if _, perr := eval.ReadPlan(h, pos[0]); perr != nil {
				return err
			}
			fmt.Fprintf(stderr, "results on the queue not read: %v\n", err) // this home's stand
		}
	}
	plan, err := eval.ReadPlan(h, pos[0])
	if err != nil {
		return fmt.Errorf("%v", err)
	}
	results, err := eval.ReadResults(h, pos[0])
	if err != nil {
		return fmt.Errorf("%v", err)
	}
	rep := eval.Summarize(plan, results)
	if *plot != "" {
		f, err := os.Create(*plot)
		if err == nil {
			err = chart.Write(f, rep, results)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("--plot %s: %v", *plot, err)
		}
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, rep)
		return nil
	}
	eval.Render(stdout, rep)
	if url != "" && !isEmbedded(url) {
		if err := showQueued(context.Background(), url, pos[0], stdout); err != nil {
			fmt.Fprintf(stderr, "workers not listed: %v\n", err) // the results above stand
		}
	}
	if *plot != "" {
		fmt.Fprintf(stdout, "\nplot %s: squares at mean tokens (x) and pass rate (y), bars the 95%% interval, dots the rollouts\n", *plot)
		fmt.Fprintf(stdout, "%-14s %-7s %5s %10s %9s %9s %9s\n", "config", "colour", "n", "tokens(x)", "pass(y)", "low", "high")
		for _, p := range chart.Points(rep) {
			fmt.Fprintf(stdout, "%-14s %-7s %5d %10.0f %9.3f %9.3f %9.3f\n", p.Config, p.Colour, p.Rollouts, p.Tokens, p.PassRate, p.Low, p.High)
		}
	}
	return nil
}
