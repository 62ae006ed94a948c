package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTakeListsEveryChange(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "keep"), "k")
	write(t, filepath.Join(dir, "d/a"), "a")
	write(t, filepath.Join(dir, "gone"), "g")
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	s := tr.Subscribe()
	if got := s.Take(); !slices.Equal(got, []string{".", "d", "d/a", "gone", "keep"}) {
		t.Fatalf("first take = %v", got)
	}
	if got := s.Take(); !slices.Equal(got, []string{"."}) {
		t.Fatalf("idle take = %v", got)
	}
	write(t, filepath.Join(dir, "new/deep/x"), "x") // a new directory tree
	must(t, os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")))
	must(t, os.Remove(filepath.Join(dir, "gone")))
	must(t, os.Chmod(filepath.Join(dir, "keep"), 0o4755))
	want := []string{".", "d", "d/a", "e", "e/a", "gone", "keep", "new", "new/deep", "new/deep/x"}
	if got := s.Take(); !slices.Equal(got, want) {
		t.Fatalf("take = %v, want %v", got, want)
	}
	// A change inside the moved directory is seen under its new name.
	write(t, filepath.Join(dir, "e/a"), "changed")
	if got := s.Take(); !slices.Equal(got, []string{".", "e/a"}) {
		t.Fatalf("take after move = %v", got)
	}
	_, apparent, count := tr.Usage()
	if apparent != int64(len("k")+len("changed")+len("x")) || count != 6 {
		t.Fatalf("usage = %d bytes, %d entries", apparent, count)
	}
	// Removing a directory removes its entries.
	must(t, os.RemoveAll(filepath.Join(dir, "new")))
	if got := s.Take(); !slices.Equal(got, []string{".", "new", "new/deep", "new/deep/x"}) {
		t.Fatalf("take after rm = %v", got)
	}
}

func TestOverflowRescans(t *testing.T) {
	dir := t.TempDir()
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	s := tr.Subscribe()
	s.Take()
	write(t, filepath.Join(dir, "f"), "f")
	mu.Lock()
	tr.rescan = true // what IN_Q_OVERFLOW does
	mu.Unlock()
	if got := s.Take(); !slices.Equal(got, []string{".", "f"}) {
		t.Fatalf("take after rescan = %v", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A file replaced by a directory and back, a link, a directory moved in
// from outside, a same-size rewrite at once (same stat on a coarse clock)
// and the entries of a large directory removed are all seen.
func TestTakeTypeChangesAndRewrites(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(dir, "x"), "file")
	write(t, filepath.Join(dir, "y/in"), "in")
	write(t, filepath.Join(dir, "same"), "aaaa")
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	s := tr.Subscribe()
	s.Take()

	must(t, os.Remove(filepath.Join(dir, "x")))
	write(t, filepath.Join(dir, "x/sub"), "now a dir")
	must(t, os.RemoveAll(filepath.Join(dir, "y")))
	write(t, filepath.Join(dir, "y"), "now a file")
	must(t, os.Symlink("x", filepath.Join(dir, "l")))
	write(t, filepath.Join(outside, "m/deep/f"), "moved in")
	must(t, os.Rename(filepath.Join(outside, "m"), filepath.Join(dir, "m")))
	want := []string{".", "l", "m", "m/deep", "m/deep/f", "x", "x/sub", "y", "y/in"}
	if got := s.Take(); !slices.Equal(got, want) {
		t.Fatalf("take = %v, want %v", got, want)
	}
	// The moved-in tree is watched: a change deep in it is seen.
	write(t, filepath.Join(dir, "m/deep/g"), "g")
	if got := s.Take(); !slices.Equal(got, []string{".", "m/deep/g"}) {
		t.Fatalf("take in moved-in tree = %v", got)
	}

	// Rewrites of the same size within one clock tick leave the stat as it
	// was (simulated: the same mtime set each time, one in the future so
	// that it stays within RacySlack however slow the machine); the entry
	// is listed each time.
	p, tick := filepath.Join(dir, "same"), time.Now().Add(time.Hour)
	for _, c := range []string{"bbbb", "cccc", "dddd"} {
		write(t, p, c)
		must(t, os.Chtimes(p, tick, tick))
		if got := s.Take(); !slices.Equal(got, []string{".", "same"}) {
			t.Fatalf("take after rewrite to %q = %v", c, got)
		}
	}

	for i := range 300 {
		write(t, filepath.Join(dir, "big", fmt.Sprintf("f%03d", i)), "z")
	}
	if got := s.Take(); len(got) != 302 {
		t.Fatalf("take after 300 creates lists %d entries, want 302", len(got))
	}
	_, _, before := tr.Usage()
	must(t, os.RemoveAll(filepath.Join(dir, "big")))
	if got := s.Take(); len(got) != 302 {
		t.Fatalf("take after rm lists %d entries, want 302", len(got))
	}
	if _, _, n := tr.Usage(); n != before-301 {
		t.Fatalf("entries after rm = %d, want %d", n, before-301)
	}
}

// A write in place that keeps size and inode and sets the mtime back to an
// old value leaves the stat as it was: the write itself lists the entry.
func TestTakeListsAWriteWithTheStatKept(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	write(t, p, "aaaa")
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(p, old, old))
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	s := tr.Subscribe()
	s.Take()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("bbbb"), 0)
	must(t, err)
	must(t, f.Close())
	must(t, os.Chtimes(p, old, old))
	if got := s.Take(); !slices.Equal(got, []string{".", "f"}) {
		t.Fatalf("take after a write with the stat kept = %v", got)
	}
	if got := s.Take(); !slices.Equal(got, []string{"."}) {
		t.Fatalf("idle take = %v", got)
	}
}

// A directory removed and made again under the same name (another inode)
// between two Takes is watched anew: what is created in it is seen.
func TestTakeDirectoryReplaced(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "d/old"), "o")
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	s := tr.Subscribe()
	s.Take()
	must(t, os.RemoveAll(filepath.Join(dir, "d")))
	write(t, filepath.Join(dir, "d/first"), "1")
	if got := s.Take(); !slices.Equal(got, []string{".", "d", "d/first", "d/old"}) {
		t.Fatalf("take after replacing d = %v", got)
	}
	write(t, filepath.Join(dir, "d/second"), "2")
	if got := s.Take(); !slices.Equal(got, []string{".", "d/second"}) {
		t.Fatalf("take in the new d = %v", got)
	}
	if _, _, n := tr.Usage(); n != 3 {
		t.Fatalf("entries = %d, want 3", n)
	}
}
