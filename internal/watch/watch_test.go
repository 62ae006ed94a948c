package watch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
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
	tr, err := For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Forget(dir)
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
	tr, err := For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Forget(dir)
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
