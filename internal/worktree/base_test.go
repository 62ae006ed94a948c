package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Worktrees created one after the other share the index of shared, but
// each keeps the baseline of its own Create: a change to shared between
// two Creates is a conflict for the first and the baseline of the second,
// also when so much changed that the index folds its base, and a merge
// into shared changes no other worktree's baseline.
func TestBaselinesStayTheirOwn(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	write(t, filepath.Join(shared, "f"), "v1")
	write(t, filepath.Join(shared, "g"), "g1")
	root := filepath.Join(t.TempDir(), "root")
	defer Cleanup(root)
	a, err := testManager.Create(shared, root, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Kind != Overlay {
		t.Skipf("overlay unavailable: %s", a.Fallback)
	}
	write(t, filepath.Join(shared, "f"), "v2") // someone else, after a's Create
	for i := range 1500 {                      // enough to fold the index
		write(t, filepath.Join(shared, "many", fmt.Sprintf("m%04d", i)), "m")
	}
	b, err := testManager.Create(shared, root, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := testManager.Create(shared, root, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	write(t, filepath.Join(a.Dir, "f"), "from a")
	rep, err := a.Merge()
	if err != nil || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "f" {
		t.Fatalf("a's merge of f changed since its Create: %+v, %v", rep, err)
	}
	write(t, filepath.Join(b.Dir, "f"), "from b")
	write(t, filepath.Join(b.Dir, "g"), "g from b")
	rep, err = b.Merge()
	if err != nil || len(rep.Conflicts) != 0 || len(rep.Applied) != 2 {
		t.Fatalf("b's merge: %+v, %v", rep, err)
	}
	// c was created before b merged: b's merge is someone else's change.
	write(t, filepath.Join(c.Dir, "g"), "g from c")
	must(t, os.Remove(filepath.Join(c.Dir, "many", "m0007")))
	rep, err = c.Merge()
	if err != nil || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "g" || len(rep.Applied) != 1 || rep.Applied[0].Path != "many/m0007" {
		t.Fatalf("c's merge: %+v, %v", rep, err)
	}
	if data, _ := os.ReadFile(filepath.Join(shared, "f")); string(data) != "from b" {
		t.Fatalf("shared f = %q", data)
	}
	// A worktree created now sees all of it as its baseline.
	d, err := testManager.Create(shared, root, "d")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	write(t, filepath.Join(d.Dir, "g"), "g from d")
	if rep, err := d.Merge(); err != nil || len(rep.Conflicts) != 0 || len(rep.Applied) != 1 {
		t.Fatalf("d's merge: %+v, %v", rep, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The links shared holds at the first Create are in the baseline, and so
// are links changed between Creates.
func TestBaselineHasSharedLinks(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	write(t, filepath.Join(shared, "f"), "f")
	must(t, os.Symlink("f", filepath.Join(shared, "l")))
	must(t, os.Symlink("f", filepath.Join(shared, "m")))
	root := filepath.Join(t.TempDir(), "root")
	defer Cleanup(root)
	a, err := testManager.Create(shared, root, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Kind != Overlay {
		t.Skipf("overlay unavailable: %s", a.Fallback)
	}
	must(t, os.Remove(filepath.Join(a.Dir, "l")))
	rep, err := a.Merge()
	if err != nil || len(rep.Applied) != 1 || rep.Applied[0].Path != "l" || rep.Applied[0].Kind != Deleted {
		t.Fatalf("a's deletion of a shared link: %+v, %v", rep, err)
	}
	if _, err := os.Lstat(filepath.Join(shared, "l")); err == nil {
		t.Fatal("the link is still in shared")
	}
	// m retargeted by someone else after b's Create: b's change is a conflict.
	b, err := testManager.Create(shared, root, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	must(t, os.Remove(filepath.Join(shared, "m")))
	must(t, os.Symlink("g", filepath.Join(shared, "m")))
	must(t, os.Remove(filepath.Join(b.Dir, "m")))
	must(t, os.Symlink("h", filepath.Join(b.Dir, "m")))
	rep, err = b.Merge()
	if err != nil || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "m" {
		t.Fatalf("b's change of a link retargeted since: %+v, %v", rep, err)
	}
	// c, created now, has m -> g as its baseline.
	c, err := testManager.Create(shared, root, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must(t, os.Remove(filepath.Join(c.Dir, "m")))
	if rep, err := c.Merge(); err != nil || len(rep.Applied) != 1 || len(rep.Conflicts) != 0 {
		t.Fatalf("c's deletion of m: %+v, %v", rep, err)
	}
}
