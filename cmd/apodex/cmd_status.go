package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/runview"
)

func cmdStatus(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("status", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON object")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	p, err := runview.Status(dir)
	if err != nil {
		return err
	}
	p.Status = liveStatus(dir, p.Status)
	if *jsonOut {
		cmdline.WriteJSON(stdout, p)
	} else {
		fmt.Fprintln(stdout, p.Text())
	}
	return nil
}
