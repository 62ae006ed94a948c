package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/state"
)

func cmdShow(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("show", "[flags] RUN", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.JSONFlag("a JSON object")
	artifacts := fs.Bool("artifacts", false, "print the artifact index: each file the agents produced with its provenance chain")
	showGrade := fs.Bool("grade", false, "print the run's HDS6 grade (grade.json, from `apodex grade`)")
	dir, err := fs.OneRun(args, home)
	if err != nil {
		return err
	}
	if *showGrade {
		return showGradeOf(dir, *jsonOut, stdout)
	}
	if *artifacts {
		return showArtifacts(dir, *jsonOut, stdout, stderr)
	}
	info, err := loadInfo(dir)
	if err != nil {
		return err
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, info)
		return nil
	}
	runview.Render(stdout, info)
	return nil
}

// showArtifacts prints the artifact index I with provenance, and with
// --json also the control state K (lease, manifest, delivery).
func showArtifacts(dir string, jsonOut bool, stdout, stderr io.Writer) error {
	st, err := state.Read(dir)
	if st == nil {
		return err
	}
	if err != nil {
		// The state up to the damaged event is still worth showing.
		fmt.Fprintf(stderr, "apodex show: the record is damaged, showing the state before it: %v\n", err)
	}
	if jsonOut {
		cmdline.WriteJSON(stdout, st.Index(filepath.Base(dir)))
		return nil
	}
	return st.RenderIndex(stdout, filepath.Base(dir))
}

func showGradeOf(dir string, jsonOut bool, stdout io.Writer) error {
	g, err := grade.Read(dir)
	if err != nil {
		return fmt.Errorf("%s has no grade yet (%v); run `apodex grade %s`", filepath.Base(dir), err, filepath.Base(dir))
	}
	if jsonOut {
		cmdline.WriteJSON(stdout, g)
		return nil
	}
	grade.Render(stdout, g)
	return nil
}
