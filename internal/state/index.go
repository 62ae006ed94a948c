package state

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Read folds the record of the run in dir one line at a time. A record
// that cannot be opened is (nil, err); a damaged one is the state before
// the damaged event, with the error.
func Read(dir string) (*State, error) {
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := New()
	sc := record.NewScanner(f)
	for err == nil && sc.Next() {
		err = st.Apply(sc.Event())
	}
	if err == nil {
		err = sc.Err()
	}
	return st, err
}

// IndexEntry is one artifact of the index, with its provenance chains.
type IndexEntry struct {
	Artifact
	Provenance []Chain `json:"provenance"`
	Line       string  `json:"line"` // the chains on one line, as RenderIndex prints them
}

// Index is the artifact index I with provenance and the control state K
// (`apodex show --artifacts --json`). Lists are never null.
type Index struct {
	RunID     string       `json:"run_id"`
	Artifacts []IndexEntry `json:"artifacts"`
	Control   Control      `json:"control"`
	Missing   []string     `json:"missing"`
	Counts    Counts       `json:"counts"`
}

// Index is the state's artifact index, by path.
func (s *State) Index(runID string) Index {
	out := Index{RunID: runID, Artifacts: []IndexEntry{}, Control: s.Control, Missing: s.Missing(nil), Counts: s.Summary()}
	for _, p := range slices.Sorted(maps.Keys(s.Artifacts)) {
		chains := s.Provenance(p)
		if chains == nil {
			chains = []Chain{}
		}
		out.Artifacts = append(out.Artifacts, IndexEntry{Artifact: s.Artifacts[p], Provenance: chains, Line: Format(chains)})
	}
	if out.Missing == nil {
		out.Missing = []string{}
	}
	return out
}

// RenderIndex writes the artifact index as text, then the lease and the
// manifest, and what the manifest names that no artifact delivers.
func (s *State) RenderIndex(w io.Writer, runID string) error {
	fmt.Fprintf(w, "run %s: %d artifacts\n", runID, len(s.Artifacts))
	if err := s.RenderArtifacts(w); err != nil {
		return err
	}
	k := s.Control
	if len(k.Manifest) > 0 {
		holder := "free"
		if k.LeaseHolder != "" {
			holder = "held by " + k.LeaseHolder
		}
		fmt.Fprintf(w, "lease: %s; manifest: %s\n", holder, strings.Join(k.Manifest, ", "))
	}
	if missing := s.Missing(nil); len(missing) > 0 {
		fmt.Fprintf(w, "missing: %s\n", strings.Join(missing, ", "))
	}
	return nil
}
