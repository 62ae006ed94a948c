package treecmd

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/runview"
)

// WorkspaceInfo is `apodex workspace --json`.
type WorkspaceInfo struct {
	RunID     string `json:"run_id"`
	Workspace string `json:"workspace"` // the run's workspace/
	// Whole: workspace/ is the whole terminal tree; else it holds what a
	// world rollout changed, over World's stored workspace (Base).
	Whole   bool     `json:"whole"`
	World   string   `json:"world,omitempty"`
	Base    string   `json:"base,omitempty"`
	Files   int      `json:"files"` // regular files under workspace/
	Removed []string `json:"removed,omitempty"`
	Opaque  []string `json:"opaque,omitempty"`
	To      string   `json:"to,omitempty"`      // with --to: where the tree was written
	Written int      `json:"written,omitempty"` // and how many files
}

// Workspace says how a run's terminal /workspace is kept and, with
// --to, writes it whole into a directory (runfiles.Materialize).
func Workspace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("workspace", "[--to DIR [--copy]] [flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON object")
	to := fs.String("to", "", "write the run's whole terminal /workspace into `DIR` (new or empty): hard links to the run's and its world's files")
	copies := fs.Bool("copy", false, "with --to: copies, writable, instead of hard links (a world's stored files are read-only)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	if *copies && *to == "" {
		return cmdline.Usagef("--copy goes with --to DIR")
	}
	if *to != "" && runview.Liveness(dir) == runview.Live {
		return fmt.Errorf("run %s is still running: its /workspace is kept once it has ended", filepath.Base(dir))
	}
	b, err := runfiles.ReadBase(dir)
	if err != nil {
		return err
	}
	wi := WorkspaceInfo{RunID: filepath.Base(dir), Workspace: filepath.Join(dir, "workspace"), Whole: b == nil, Files: countFiles(filepath.Join(dir, "workspace"))}
	if b != nil {
		wi.World, wi.Base, wi.Removed, wi.Opaque = b.World, b.Dir(dir), b.Removed, b.Opaque
	}
	if *to != "" {
		if wi.Written, err = runfiles.Materialize(dir, *to, *copies); err != nil {
			return fmt.Errorf("the workspace of run %s: %w", wi.RunID, err)
		}
		wi.To = *to
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, wi)
		return nil
	}
	fmt.Fprintf(stdout, "run:       %s\n", wi.RunID)
	if wi.Whole {
		fmt.Fprintf(stdout, "workspace: %s (the whole tree, %d files)\n", wi.Workspace, wi.Files)
	} else {
		fmt.Fprintf(stdout, "workspace: %s (what the rollout changed or created: %d files)\n", wi.Workspace, wi.Files)
		fmt.Fprintf(stdout, "base:      world %s, stored at %s: every other file\n", wi.World, wi.Base)
		if hidden := append(append([]string{}, wi.Removed...), wi.Opaque...); len(hidden) > 0 {
			fmt.Fprintf(stdout, "removed:   %s\n", shortList(wi.Removed, 20))
			if len(wi.Opaque) > 0 {
				fmt.Fprintf(stdout, "emptied:   %s\n", shortList(wi.Opaque, 20))
			}
		}
	}
	if wi.To != "" {
		how := "hard links"
		if *copies {
			how = "copies"
		}
		fmt.Fprintf(stdout, "wrote %d files to %s (%s)\n", wi.Written, wi.To, how)
	} else if !wi.Whole {
		fmt.Fprintf(stdout, "apodex workspace --to DIR %s writes the whole tree\n", wi.RunID)
	}
	return nil
}

// countFiles counts the regular files below dir (0 when it is missing).
func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// shortList joins at most max items, saying how many more there are.
func shortList(items []string, max int) string {
	if len(items) == 0 {
		return "-"
	}
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more (--json lists all)", strings.Join(items[:max], ", "), len(items)-max)
}
