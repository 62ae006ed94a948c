package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("verify", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON object")
	rec := fs.Bool("record", false, "check the record's integrity instead (its hash chain and head: is it as apodex wrote it?)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	if *rec {
		return verifyRecord(dir, *jsonOut, stdout)
	}
	rv, err := run.Reverify(ctx, dir)
	if err != nil {
		return err
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, rv)
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
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}

// recordCheck is `verify --record --json`.
type recordCheck struct {
	RunID     string           `json:"run_id"`
	Events    int              `json:"events"`
	TornTail  bool             `json:"torn_tail,omitempty"`
	Integrity record.Integrity `json:"integrity"`
	// Intact: the chain and head hold; false for a broken record and for
	// one written before the chain (Integrity.Chained false: unchecked).
	Intact bool   `json:"intact"`
	Text   string `json:"text"`
}

// verifyRecord checks the record of dir against its hash chain and head
// (internal/record, chain.go): exit 0 when they hold or the record has no
// chain (said as unchecked), 1 when they do not, naming the first bad seq
// and its line.
func verifyRecord(dir string, jsonOut bool, stdout io.Writer) error {
	c, err := record.Read(dir)
	if err != nil { // a garbled line, a gap: named by the reader
		return err
	}
	in := c.Integrity
	rc := recordCheck{RunID: filepath.Base(dir), Events: len(c.Events), TornTail: c.TornTail, Integrity: in}
	switch {
	case in.Err != nil:
		rc.Text = strings.TrimPrefix(in.Err.Error(), "record: ")
	case !in.Chained:
		rc.Text = fmt.Sprintf("%d events; no hash chain (written by an apodex from before the chain): not checked", rc.Events)
	default:
		rc.Intact = true
		rc.Text = fmt.Sprintf("%d events, hash-chained from seq %d, %s at seq %d: intact", rc.Events, in.From, record.HeadFile, in.HeadSeq)
		if in.From > 1 {
			rc.Text += fmt.Sprintf(" (seq 1 to %d were written by an apodex from before the chain and are not covered)", in.From-1)
		}
	}
	if c.TornTail {
		rc.Text += "; its last line is torn (the process stopped mid-write: apodex resume cuts it)"
	}
	if jsonOut {
		cmdline.WriteJSON(stdout, rc)
	} else {
		fmt.Fprintf(stdout, "record of run %s: %s\n", rc.RunID, rc.Text)
	}
	if in.Err != nil {
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}
