package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// Mark and Since give exactly what two snapshots and Diff give: creates,
// modifications, deletions (also of a whole directory), a rename as a
// delete and a create; a mode change alone and a same-content rewrite are
// not deltas; links and temporary files are not files.
func TestMarkSinceMatchesSnapshots(t *testing.T) {
	base := t.TempDir()
	w := &FS{Inputs: filepath.Join(base, "i"), Workspace: filepath.Join(base, "w"), Outputs: filepath.Join(base, "o")}
	for _, d := range []string{w.Inputs, w.Workspace, w.Outputs} {
		must(t, os.MkdirAll(d, 0o755))
	}
	put := func(rel, s string) {
		p := filepath.Join(w.Workspace, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(s), 0o644))
	}
	put("same.txt", "same")
	put("mod.txt", "old")
	put("del.txt", "gone")
	put("dir/a", "a")
	put("dir/b", "b")
	put("from.txt", "moved")
	put("mode.txt", "m")
	m, err := w.Mark(Workspace, Outputs)
	must(t, err)
	before, err := w.Snapshot(Workspace)
	must(t, err)

	put("same.txt", "same")
	put("mod.txt", "new")
	put("new/deep.txt", "deep")
	must(t, os.Remove(filepath.Join(w.Workspace, "del.txt")))
	must(t, os.RemoveAll(filepath.Join(w.Workspace, "dir")))
	must(t, os.Rename(filepath.Join(w.Workspace, "from.txt"), filepath.Join(w.Workspace, "to.txt")))
	must(t, os.Chmod(filepath.Join(w.Workspace, "mode.txt"), 0o600))
	must(t, os.Symlink("same.txt", filepath.Join(w.Workspace, "link")))
	must(t, os.WriteFile(filepath.Join(w.Outputs, "out.md"), []byte("o"), 0o644))

	got, err := w.Since(m)
	must(t, err)
	after, err := w.Snapshot(Workspace)
	must(t, err)
	want := Diff(before, after)
	want = append([]Delta{{Path: "/outputs/out.md", After: HashBytes([]byte("o")), Bytes: 1}}, want...)
	if len(got) != len(want) {
		t.Fatalf("got %d deltas %+v, want %+v", len(got), got, want)
	}
	for i := range got {
		g, x := got[i], want[i]
		if g.Path != x.Path || g.Before != x.Before || g.After != x.After || g.Bytes != x.Bytes {
			t.Errorf("delta %d = %+v, want %+v", i, g, x)
		}
	}
	// A second command sees only its own change.
	m, err = w.Mark(Workspace)
	must(t, err)
	put("mod.txt", "newer")
	got, err = w.Since(m)
	must(t, err)
	if len(got) != 1 || got[0].Path != "/workspace/mod.txt" || got[0].Before != HashBytes([]byte("new")) {
		t.Fatalf("second command: %+v", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
