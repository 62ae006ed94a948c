package watch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A seeded tree takes the hashes Seed's function gives for its first walk
// and does not read those files: a seeded (deliberately wrong) sum is the
// content before a change; an unseeded file is read.
func TestSeedIsTakenWithoutReading(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "seeded"), "a")
	write(t, filepath.Join(dir, "sub/read"), "b")
	old := time.Now().Add(-time.Hour) // not racy
	for _, p := range []string{"seeded", "sub/read"} {
		must(t, os.Chtimes(filepath.Join(dir, p), old, old))
	}
	set := NewSet()
	defer set.Close()
	asked := map[string]bool{}
	set.Seed(dir, func(rel string, e Entry) (Sum, bool) {
		asked[rel] = true
		return sumOf("what the manifest says"), rel == "seeded"
	})
	tr, err := set.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !asked["seeded"] || !asked["sub/read"] {
		t.Fatalf("the seed was asked for %v", asked)
	}
	m := tr.Mark()
	defer m.Close()
	write(t, filepath.Join(dir, "seeded"), "c")
	write(t, filepath.Join(dir, "sub/read"), "d")
	got := map[string]FileChange{}
	for _, c := range m.TakeFiles() {
		got[c.Rel] = c
	}
	if c := got["seeded"]; !c.Had || c.Before != sumOf("what the manifest says") || c.After != sumOf("c") {
		t.Errorf("seeded file: %+v; want the seeded sum before (it must not have been read) and c after", c)
	}
	if c := got["sub/read"]; !c.Had || c.Before != sumOf("b") {
		t.Errorf("unseeded file: %+v; want its content read", c)
	}
	// The seed served the first walk only.
	set.Forget(dir)
	asked = map[string]bool{}
	if _, err := set.For(dir); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 {
		t.Errorf("a later tree asked the seed for %v", asked)
	}
}
