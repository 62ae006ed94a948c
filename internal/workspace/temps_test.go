package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apodex/apodex/internal/watch"
)

// RemoveTempsIn removes the runtime's temporary files a watched plane's
// tree holds (one there before the tree, one made after), and nothing
// else; through a link it removes nothing outside the plane. Unwatched,
// it walks.
func TestRemoveTempsInUsesTheTree(t *testing.T) {
	for _, watched := range []bool{true, false} {
		root := t.TempDir()
		outside := t.TempDir()
		os.MkdirAll(filepath.Join(root, "d"), 0o755)
		os.WriteFile(filepath.Join(root, "d", ".a.apodex-1"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(root, "keep.txt"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(outside, ".o.apodex-1"), []byte("x"), 0o644)
		os.Symlink(outside, filepath.Join(root, "out"))
		set := watch.NewSet()
		if watched {
			if _, err := set.For(root); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(root, ".b.apodex-2"), []byte("x"), 0o644)
		got := RemoveTempsIn(set, root)
		want := []string{filepath.Join(root, ".b.apodex-2"), filepath.Join(root, "d", ".a.apodex-1")}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("watched %v: removed %v, want %v", watched, got, want)
		}
		for _, p := range []string{filepath.Join(root, "keep.txt"), filepath.Join(outside, ".o.apodex-1")} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("watched %v: %s removed: %v", watched, p, err)
			}
		}
		set.Close()
	}
}
