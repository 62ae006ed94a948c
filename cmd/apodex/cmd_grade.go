package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

func cmdGrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("grade", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("grade.json")
	var mf runflags.Model
	mf.Register(fs)
	stages := map[string]*string{}
	for _, s := range []string{"mapper", "judge", "reviewer", "arbiter"} {
		stages[s] = fs.String(s+"-model", "", "model name for the "+s+" stage (default: --model, else the run's model)")
	}
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	c, err := record.Read(dir)
	if err != nil {
		return err
	}
	var rs record.RunStarted
	if len(c.Events) == 0 || c.Events[0].Decode(&rs) != nil {
		return fmt.Errorf("%s: the record does not start with run_started; grade a run that started", dir)
	}
	if rs.Model.Provider == "scripted" && mf.Provider == "" {
		return cmdline.Usagef("%s ran on the scripted model, which cannot grade; pass --provider openai --base-url URL --model NAME (or anthropic) for the graders", rs.RunID)
	}
	build := func(stage string) (llm.Model, error) {
		n := mf
		if v := *stages[stage]; v != "" {
			n.Name = v
		}
		m, _, err := n.FromRecord(dir, rs.Model)
		if err != nil {
			return nil, err
		}
		// The graders' calls retry as a run's do (429, 5xx, dropped
		// connections), each retry said on stderr.
		return llm.WithRetry(m, llm.RetryPolicy{OnRetry: func(attempt int, err error, wait time.Duration) {
			fmt.Fprintf(stderr, "grade: %s: attempt %d failed (%v); retrying in %s\n", stage, attempt, err, wait.Round(time.Millisecond))
		}}), nil
	}
	var ms grade.Models
	for stage, p := range map[string]*llm.Model{"mapper": &ms.Mapper, "judge": &ms.Judge, "reviewer": &ms.Reviewer, "arbiter": &ms.Arbiter} {
		if *p, err = build(stage); err != nil {
			return err
		}
	}
	res, err := grade.Run(ctx, dir, ms)
	if err != nil {
		return err
	}
	if err := grade.Write(dir, res); err != nil {
		return fmt.Errorf("writing %s: %w", grade.File, err)
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, res)
		return nil
	}
	grade.Render(stdout, res)
	return nil
}
