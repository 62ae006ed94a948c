package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kernelWatches counts the watches the kernel holds on this process's
// inotify descriptor (the "inotify wd:" lines of its fdinfo).
func kernelWatches(t *testing.T) int {
	t.Helper()
	mu.Lock()
	fd := ifd
	mu.Unlock()
	if fd < 0 {
		t.Skip("no inotify here")
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Skipf("no fdinfo: %v", err)
	}
	return strings.Count(string(data), "inotify wd:")
}

func TestForgetReleasesWatchesAndRewatches(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a/x/f"), "f")
	write(t, filepath.Join(dir, "b/g"), "g")
	if _, err := For(t.TempDir()); err != nil { // open the descriptor
		t.Fatal(err)
	}
	before := kernelWatches(t)
	tr, err := For(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := kernelWatches(t) - before; got != 4 { // the root, a, a/x, b
		t.Fatalf("watching added %d kernel watches, want 4", got)
	}
	s := tr.Subscribe()
	s.Take()

	Forget(dir)
	if got := kernelWatches(t); got != before {
		t.Fatalf("after Forget %d kernel watches, want %d", got, before)
	}
	if Lookup(dir) != nil {
		t.Fatal("a forgotten tree is still looked up")
	}
	if _, _, n := tr.Usage(); n != 0 {
		t.Fatalf("a forgotten tree's Usage counts %d entries, want 0", n)
	}
	// Its old subscriber sees nothing more, and adds no watch.
	write(t, filepath.Join(dir, "b/h"), "h")
	if got := s.Take(); !slices.Equal(got, []string{"."}) {
		t.Fatalf("take of a forgotten tree = %v, want only .", got)
	}
	if got := kernelWatches(t); got != before {
		t.Fatalf("a forgotten tree's Take added watches: %d, want %d", got, before)
	}

	// Watching again works as the first time.
	tr2, err := For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Forget(dir)
	if tr2 == tr {
		t.Fatal("For after Forget returned the forgotten tree")
	}
	if got := kernelWatches(t) - before; got != 4 {
		t.Fatalf("watching again added %d kernel watches, want 4", got)
	}
	s2 := tr2.Subscribe()
	if got := s2.Take(); !slices.Equal(got, []string{".", "a", "a/x", "a/x/f", "b", "b/g", "b/h"}) {
		t.Fatalf("first take after rewatch = %v", got)
	}
	write(t, filepath.Join(dir, "a/x/new"), "n")
	if got := s2.Take(); !slices.Equal(got, []string{".", "a/x/new"}) {
		t.Fatalf("take after rewatch = %v", got)
	}
}

func TestForgetUnder(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"run/workspace", "run/outputs/scratch", "other"} {
		must(t, os.MkdirAll(filepath.Join(base, d), 0o755))
		if _, err := For(filepath.Join(base, d)); err != nil {
			t.Fatal(err)
		}
	}
	defer Forget(filepath.Join(base, "other"))
	ForgetUnder(filepath.Join(base, "run"))
	for _, d := range []string{"run/workspace", "run/outputs/scratch"} {
		if Lookup(filepath.Join(base, d)) != nil {
			t.Errorf("%s is still watched", d)
		}
	}
	if Lookup(filepath.Join(base, "other")) == nil {
		t.Error("a tree outside the directory was forgotten")
	}
}
