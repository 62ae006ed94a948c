package watch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Files lists a tree's regular files in WalkDir's order from what the tree
// knows: a seeded (deliberately wrong) sum comes back as it is, so the
// untouched file was not read; a file changed since is read again; limit
// bounds the list and the rest is counted.
func TestFilesListsWhatTheTreeKnows(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"b/x", "a.txt", "a/y", "c"} {
		write(t, filepath.Join(dir, p), p)
	}
	old := time.Now().Add(-time.Hour) // not racy
	for _, p := range []string{"b/x", "a.txt", "a/y", "c"} {
		must(t, os.Chtimes(filepath.Join(dir, p), old, old))
	}
	must(t, os.Symlink("c", filepath.Join(dir, "link")))
	set := NewSet()
	defer set.Close()
	set.Seed(dir, func(rel string, e Entry) (Sum, bool) { return sumOf("manifest of " + rel), true })
	tr, err := set.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "c"), "changed")
	files, more := tr.Files(10)
	var rels []string
	for _, f := range files {
		rels = append(rels, f.Rel)
		want := sumOf("manifest of " + f.Rel)
		if f.Rel == "c" {
			want = sumOf("changed")
		}
		if !f.Hashed || f.Sum != want {
			t.Errorf("%s: sum %v hashed %v, want %v", f.Rel, f.Sum, f.Hashed, want)
		}
	}
	// filepath.WalkDir's order: each directory's entries sorted by name.
	if want := []string{"a/y", "a.txt", "b/x", "c"}; !reflect.DeepEqual(rels, want) || more != 0 {
		t.Errorf("files %v (%d more), want %v", rels, more, want)
	}
	if files, more := tr.Files(2); len(files) != 2 || more != 2 {
		t.Errorf("limit 2: %d files, %d more; want 2 and 2", len(files), more)
	}
	write(t, filepath.Join(dir, "a", ".x.apodex-tmp"), "t")
	got := tr.Matching(func(name string) bool { return strings.HasPrefix(name, ".") })
	if !reflect.DeepEqual(got, []string{"a/.x.apodex-tmp"}) {
		t.Errorf("Matching found %v", got)
	}
}
