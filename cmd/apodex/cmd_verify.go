package main

import (
	"context"
	"fmt"
	"io"

	"github.com/apodex/apodex/internal/run"
)

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object")
	dir, err := fs.oneRun(args, home)
	if err != nil {
		return err
	}
	rv, err := run.Reverify(ctx, dir)
	if err != nil {
		return err
	}
	if *jsonOut {
		writeJSON(stdout, rv)
	} else {
		if rv.Warning != "" {
			fmt.Fprintf(stdout, "WARNING: %s\n", rv.Warning)
		}
		for _, f := range rv.Checks {
			fmt.Fprintf(stdout, "check %-14s %-28s %s %s\n", f.Constraint, f.Path, passWord(f.OK), oneLine(f.Detail))
		}
		for _, r := range rv.Verify {
			fmt.Fprintf(stdout, "verify %s: %s %s\n", r.Label(), passWord(r.Passed), oneLine(r.Detail))
		}
		fmt.Fprintf(stdout, "run %s: verification %s\n", rv.RunID, passWord(rv.Passed))
	}
	if !rv.Passed {
		return exitError(exitFailed)
	}
	return nil
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}
