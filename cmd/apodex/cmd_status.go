package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apodex/apodex/internal/runview"
)

func cmdStatus(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	p, err := runview.Status(dir)
	if err != nil {
		return err
	}
	p.Status = liveStatus(dir, p.Status)
	if *jsonOut {
		writeJSON(stdout, p)
	} else {
		fmt.Fprintln(stdout, p.Text())
	}
	return nil
}
