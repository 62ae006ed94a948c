package worktree

import (
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/workspace"
)

// A closed worktree's view is watched no longer: its tree is forgotten and
// the watches it held are released; a new worktree of the same name is
// watched afresh.
func TestCloseForgetsTheView(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			shared := filepath.Join(t.TempDir(), "shared")
			write(t, filepath.Join(shared, "a/b/f"), "f")
			root := filepath.Join(t.TempDir(), "root")
			defer Cleanup(root)
			for round := range 2 {
				w, err := k.create(shared, root, "A1")
				if err != nil {
					t.Fatal(err)
				}
				// What an agent's step does: index and watch its /workspace, in
				// the Set its worktrees are watched in (a run gives both the same).
				fs := &workspace.FS{Inputs: t.TempDir(), Workspace: w.Dir, Outputs: t.TempDir(), Watch: testManager.Watch()}
				m, err := fs.Mark(workspace.Workspace)
				if err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(w.Dir, "a/new"), "n")
				ds, err := fs.Since(m)
				if err != nil || len(ds) != 1 || ds[0].Path != "/workspace/a/new" {
					t.Fatalf("round %d: deltas %+v, %v", round, ds, err)
				}
				tr := testManager.Watch().Lookup(w.Dir)
				if tr == nil || tr.Watches() != 3 { // the view, a, a/b
					t.Fatalf("round %d: the view is not watched (%v)", round, tr)
				}
				fs.Release()
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if testManager.Watch().Lookup(w.Dir) != nil {
					t.Fatalf("round %d: a closed worktree's view is still watched", round)
				}
				if n := tr.Watches(); n != 0 {
					t.Fatalf("round %d: the closed view's tree holds %d watches", round, n)
				}
			}
		})
	}
}
