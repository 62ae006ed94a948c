package livecmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
)

func Review(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("review", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	approve := fs.Bool("approve", false, "approve the run: it completes")
	reject := fs.Bool("reject", false, "reject the run: it fails")
	note := fs.String("note", "", "why (recorded with the decision)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	if *approve == *reject {
		return cmdline.Usagef("give exactly one of --approve or --reject (with --note TEXT)")
	}
	info, err := runview.Load(dir)
	if err != nil {
		return err
	}
	if info.Status != run.StatusAwaitingReview {
		return fmt.Errorf("run %s is %s, not awaiting review; only a run whose human clause is pending can be reviewed (see apodex runs --status awaiting_review)", filepath.Base(dir), info.Status)
	}
	rv := record.Review{Decision: record.ReviewRejected, Note: *note, By: "user"}
	if *approve {
		rv.Decision = record.ReviewApproved
	}
	log, _, _, err := record.Open(dir, time.Now)
	if err != nil {
		return err
	}
	if _, err := log.Append(record.TypeReview, "user", rv); err != nil {
		log.Close()
		return err
	}
	if err := log.Close(); err != nil {
		return err
	}
	after, err := runview.Load(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s: %s; status %s\n", filepath.Base(dir), rv.Decision, after.Status)
	return nil
}
