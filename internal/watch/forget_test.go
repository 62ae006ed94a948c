package watch

import (
	"errors"
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
	if _, err := trees.For(t.TempDir()); err != nil { // open the descriptor
		t.Fatal(err)
	}
	before := kernelWatches(t)
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := kernelWatches(t) - before; got != 4 { // the root, a, a/x, b
		t.Fatalf("watching added %d kernel watches, want 4", got)
	}
	s := tr.Subscribe()
	s.Take()

	trees.Forget(dir)
	if got := kernelWatches(t); got != before {
		t.Fatalf("after Forget %d kernel watches, want %d", got, before)
	}
	if trees.Lookup(dir) != nil {
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
	tr2, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
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
		if _, err := trees.For(filepath.Join(base, d)); err != nil {
			t.Fatal(err)
		}
	}
	defer trees.Forget(filepath.Join(base, "other"))
	trees.ForgetUnder(filepath.Join(base, "run"))
	for _, d := range []string{"run/workspace", "run/outputs/scratch"} {
		if trees.Lookup(filepath.Join(base, d)) != nil {
			t.Errorf("%s is still watched", d)
		}
	}
	if trees.Lookup(filepath.Join(base, "other")) == nil {
		t.Error("a tree outside the directory was forgotten")
	}
}

// trees is the Set of this package's tests.
var trees = NewSet()

// TestSetsAreApart: two Sets watch the same directory with trees of their
// own, and closing one forgets its trees (and their kernel watches) only.
func TestSetsAreApart(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a/f"), "f")
	if _, err := trees.For(t.TempDir()); err != nil { // open the descriptor
		t.Fatal(err)
	}
	before := kernelWatches(t)
	one, two := NewSet(), NewSet()
	defer two.Close()
	t1, err := one.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := two.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	if t1 == t2 || one.Lookup(dir) != t1 || two.Lookup(dir) != t2 || !Watching(dir) {
		t.Fatal("two sets share a tree")
	}
	one.Close()
	if one.Lookup(dir) != nil || two.Lookup(dir) != t2 {
		t.Fatal("Close forgot a tree of another set, or kept its own")
	}
	if _, err := one.For(dir); !errors.Is(err, ErrClosed) {
		t.Fatalf("For on a closed set: %v, want ErrClosed", err)
	}
	if got := kernelWatches(t) - before; got != 2 { // two's root and a
		t.Fatalf("after closing one set %d kernel watches, want two's 2", got)
	}
	two.Close()
	if Watching(dir) {
		t.Fatal("a directory of two closed sets is still watched")
	}
	if got := kernelWatches(t); got != before {
		t.Fatalf("after closing both %d kernel watches, want %d", got, before)
	}
}
