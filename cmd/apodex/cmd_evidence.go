package main

import (
	"context"
	"io"

	"github.com/apodex/apodex/internal/evidence"
)

func cmdEvidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("evidence", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object (with each id's exact text)")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	list, err := evidence.List(dir, *jsonOut)
	if err != nil {
		return err
	}
	if *jsonOut {
		writeJSON(stdout, list)
		return nil
	}
	list.Render(stdout)
	return nil
}
