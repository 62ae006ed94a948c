package worktree

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMergeNeverThroughALink: while an agent wrote d/x (d a directory of
// its own), someone made shared's d a link, to a host directory or inside
// the workspace. The merge must not write through it: it is a conflict,
// nothing outside shared changes, and the agent's version is kept.
func TestMergeNeverThroughALink(t *testing.T) {
	for _, k := range kinds {
		for _, target := range []string{"host", "dir"} {
			t.Run(k.name+"/"+target, func(t *testing.T) {
				shared, root := setup(t)
				host := filepath.Join(filepath.Dir(shared), "host")
				if err := os.Mkdir(host, 0o755); err != nil {
					t.Fatal(err)
				}
				w := open(t, k.create, shared, root, "A1")
				write(t, filepath.Join(w.Dir, "d", "x"), "pwned")
				link := host
				if target == "dir" {
					link = "dir"
				}
				if err := os.Symlink(link, filepath.Join(shared, "d")); err != nil {
					t.Fatal(err)
				}
				rep, err := w.Merge()
				if err != nil {
					t.Fatal(err)
				}
				if entries, _ := os.ReadDir(host); len(entries) != 0 {
					t.Fatalf("merge wrote outside shared: %v", entries)
				}
				if exists(filepath.Join(shared, "dir", "x")) {
					t.Fatal("merge wrote through a link inside shared")
				}
				if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "d/x" {
					t.Fatalf("report %+v", rep)
				}
				if c := rep.Conflicts[0].Copy; c == "" || read(t, c) != "pwned" {
					t.Fatalf("the agent's version was not kept: %+v", rep.Conflicts[0])
				}
			})
		}
	}
}
