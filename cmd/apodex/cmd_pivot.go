package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/trajectory"
)

func cmdPivot(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("pivot", "[flags] RUN --siblings RUN...", stdout, stderr)
	home := fs.HomeFlag()
	siblings := fs.Bool("siblings", false, "the runs after RUN are sibling rollouts of the same world (the successful ones are compared)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if !*siblings || len(pos) < 2 {
		return cmdline.Usagef("give the failed run, then --siblings and at least one sibling run of the same world")
	}
	var runs []*trajectory.Run
	for _, id := range pos {
		dir, err := cmdline.FindRun(*home, id)
		if err != nil {
			return err
		}
		r, err := trajectory.Load(dir)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	p, err := trajectory.FindPivot(runs[0], runs[1:])
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	cmdline.WriteJSON(stdout, p)
	return nil
}
