package main

import (
	"context"
	"io"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/evidence"
)

func cmdEvidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("evidence", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON object (with each id's exact text)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	list, err := evidence.List(dir, *jsonOut)
	if err != nil {
		return err
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, list)
		return nil
	}
	list.Render(stdout)
	return nil
}
