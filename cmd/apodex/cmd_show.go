package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runinfo"
	"github.com/apodex/apodex/internal/state"
)

func cmdShow(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("show", "[flags] RUN", stdout, stderr)
	home := fs.homeFlag()
	jsonOut := fs.jsonFlag("a JSON object")
	artifacts := fs.Bool("artifacts", false, "print the artifact index: each file the agents produced with its provenance chain")
	showGrade := fs.Bool("grade", false, "print the run's HDS6 grade (grade.json, from `apodex grade`)")
	dir, err := fs.oneRun(args, home)
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
		writeJSON(stdout, info)
		return nil
	}
	runinfo.Render(stdout, info)
	return nil
}

// artifactEntry is one artifact of `show --artifacts --json`.
type artifactEntry struct {
	state.Artifact
	Provenance []state.Chain `json:"provenance"`
	Line       string        `json:"line"` // the chains on one line, as the text output prints them
}

// showArtifacts prints the artifact index I with provenance, and with
// --json also the control state K (lease, manifest, delivery).
func showArtifacts(dir string, jsonOut bool, stdout, stderr io.Writer) error {
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	st := state.New() // streamed: one line of the record at a time
	sc := record.NewScanner(f)
	for err == nil && sc.Next() {
		err = st.Apply(sc.Event())
	}
	if err == nil {
		err = sc.Err()
	}
	if err != nil {
		// The state up to the damaged event is still worth showing.
		fmt.Fprintf(stderr, "apodex show: the record is damaged, showing the state before it: %v\n", err)
	}
	if jsonOut {
		paths := slices.Sorted(maps.Keys(st.Artifacts))
		out := struct {
			RunID     string          `json:"run_id"`
			Artifacts []artifactEntry `json:"artifacts"`
			Control   state.Control   `json:"control"`
			Missing   []string        `json:"missing"`
			Counts    state.Counts    `json:"counts"`
		}{RunID: filepath.Base(dir), Artifacts: []artifactEntry{}, Control: st.Control, Missing: st.Missing(nil), Counts: st.Summary()}
		for _, p := range paths {
			chains := st.Provenance(p)
			if chains == nil {
				chains = []state.Chain{}
			}
			out.Artifacts = append(out.Artifacts, artifactEntry{Artifact: st.Artifacts[p], Provenance: chains, Line: state.Format(chains)})
		}
		if out.Missing == nil {
			out.Missing = []string{}
		}
		writeJSON(stdout, out)
		return nil
	}
	fmt.Fprintf(stdout, "run %s: %d artifacts\n", filepath.Base(dir), len(st.Artifacts))
	if err := st.RenderArtifacts(stdout); err != nil {
		return err
	}
	k := st.Control
	if len(k.Manifest) > 0 {
		holder := "free"
		if k.LeaseHolder != "" {
			holder = "held by " + k.LeaseHolder
		}
		fmt.Fprintf(stdout, "lease: %s; manifest: %s\n", holder, strings.Join(k.Manifest, ", "))
	}
	if missing := st.Missing(nil); len(missing) > 0 {
		fmt.Fprintf(stdout, "missing: %s\n", strings.Join(missing, ", "))
	}
	return nil
}

func showGradeOf(dir string, jsonOut bool, stdout io.Writer) error {
	g, err := grade.Read(dir)
	if err != nil {
		return fmt.Errorf("%s has no grade yet (%v); run `apodex grade %s`", filepath.Base(dir), err, filepath.Base(dir))
	}
	if jsonOut {
		writeJSON(stdout, g)
		return nil
	}
	grade.Render(stdout, g)
	return nil
}
