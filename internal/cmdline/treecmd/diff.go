package treecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/repo"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
)

// Diff prints what a run on a tree (run --repo) changed in its
// /workspace, as a unified diff in git's format.
func Diff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("diff", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	changes, _, err := repoChanges(dir)
	if err != nil {
		return err
	}
	d, err := repo.Diff(changes, filepath.Join(dir, "workspace"), run.RepoBlobs(dir))
	if err != nil {
		return err
	}
	io.WriteString(termtext.Raw(stdout), d) // exact: a patch must apply
	return nil
}

// Apply writes a run's change into its tree (or --to DIR), all or
// nothing, refusing files changed there since the run started.
func Apply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("apply", "[--to DIR] [flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	to := fs.String("to", "", "the tree to change (default: the tree the run was started on, --repo)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	if runview.Liveness(dir) == runview.Live {
		return fmt.Errorf("run %s is still running: apply its change once it has ended", filepath.Base(dir))
	}
	changes, b, err := repoChanges(dir)
	if err != nil {
		return err
	}
	target := b.Dir
	if *to != "" {
		target = *to
	}
	if len(changes) == 0 {
		fmt.Fprintf(stdout, "run %s changed nothing; %s left as it is\n", filepath.Base(dir), target)
		return nil
	}
	err = repo.Apply(changes, filepath.Join(dir, "workspace"), target)
	var ce *repo.ConflictError
	if errors.As(err, &ce) {
		return fmt.Errorf("nothing applied to %s: %v; review with apodex diff %s and merge by hand", target, ce, filepath.Base(dir))
	}
	if err != nil {
		return fmt.Errorf("nothing applied to %s: %w", target, err)
	}
	for _, c := range changes {
		kind := "modified"
		switch {
		case c.Base == nil:
			kind = "added"
		case c.New == nil:
			kind = "deleted"
		}
		fmt.Fprintf(stdout, "%-8s %s\n", kind, c.Path)
	}
	fmt.Fprintf(stdout, "applied %d change(s) of run %s to %s\n", len(changes), filepath.Base(dir), target)
	return nil
}

func repoChanges(dir string) ([]repo.Change, *repo.Baseline, error) {
	b, err := run.RepoBaseline(dir)
	if err != nil {
		return nil, nil, err
	}
	changes, err := b.Changes(filepath.Join(dir, "workspace"))
	return changes, b, err
}
