package watch

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

func sumOf(s string) Sum { return sha256.Sum256([]byte(s)) }

// TakeFiles of a Mark gives each file's content at the Mark and now:
// creates, modifications, deletions, a rename as both, a file recreated
// with other content as a modification; a chmod, a chown-free rewrite with
// the same bytes and a file removed and made again with the same bytes
// are no change; directories and links are not files.
func TestMarkTakeFiles(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]string{"mod": "m1", "del": "d", "from": "r", "mode": "x", "same": "s", "again": "a1", "back": "b", "d/in": "i"} {
		write(t, filepath.Join(dir, name), c)
	}
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	m := tr.Mark()
	defer m.Close()

	write(t, filepath.Join(dir, "mod"), "m2")
	write(t, filepath.Join(dir, "new/deep"), "n")
	must(t, os.Remove(filepath.Join(dir, "del")))
	must(t, os.Rename(filepath.Join(dir, "from"), filepath.Join(dir, "to")))
	must(t, os.Chmod(filepath.Join(dir, "mode"), 0o600))
	write(t, filepath.Join(dir, "same"), "s")
	must(t, os.Remove(filepath.Join(dir, "again")))
	write(t, filepath.Join(dir, "again"), "a2")
	must(t, os.Remove(filepath.Join(dir, "back")))
	write(t, filepath.Join(dir, "back"), "b")
	must(t, os.RemoveAll(filepath.Join(dir, "d")))
	write(t, filepath.Join(dir, "d"), "now a file")
	must(t, os.Symlink("mod", filepath.Join(dir, "link")))

	type fc struct {
		rel           string
		before, after string // "" none
	}
	want := []fc{
		{"again", "a1", "a2"}, {"d", "", "now a file"}, {"d/in", "i", ""}, {"del", "d", ""},
		{"from", "r", ""}, {"mod", "m1", "m2"}, {"new/deep", "", "n"}, {"to", "", "r"},
	}
	got := m.TakeFiles()
	if len(got) != len(want) {
		t.Fatalf("take files = %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.Rel != w.rel || g.Had != (w.before != "") || g.Has != (w.after != "") ||
			(g.Had && g.Before != sumOf(w.before)) || (g.Has && g.After != sumOf(w.after)) {
			t.Errorf("change %d = %+v, want %+v", i, g, w)
		}
		if g.Has && g.Size != int64(len(w.after)) {
			t.Errorf("%s: size %d, want %d", g.Rel, g.Size, len(w.after))
		}
	}
	if got := m.TakeFiles(); len(got) != 0 {
		t.Fatalf("idle take files = %+v", got)
	}
	// A Sub made by Subscribe lists every file first.
	s := tr.Subscribe()
	defer s.Close()
	all := s.TakeFiles()
	if len(all) != 8 { // again back d mod mode new/deep same to
		names := []string{}
		for _, c := range all {
			names = append(names, c.Rel)
		}
		t.Fatalf("first take files lists %v", names)
	}
}

// Content is hashed when asked for: a change made before a Mark, not yet
// hashed by anyone, is the Mark's Before; two changes after it give the
// first Before and the last After; Take alone reads no content.
func TestMarkSeesContentAtTheMark(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	write(t, p, "v1")
	tr, err := trees.For(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trees.Forget(dir)
	s := tr.Subscribe()
	defer s.Close()
	s.Take()
	write(t, p, "v2")
	if got := s.Take(); len(got) != 2 || got[1] != "f" {
		t.Fatalf("take = %v", got)
	}
	mu.Lock()
	stale := len(tr.stale)
	mu.Unlock()
	if stale != 1 {
		t.Fatalf("%d files to hash after a Take, want 1 (Take reads no content)", stale)
	}
	m := tr.Mark()
	defer m.Close()
	write(t, p, "v3")
	write(t, p, "v4!")
	got := m.TakeFiles()
	if len(got) != 1 || got[0].Before != sumOf("v2") || got[0].After != sumOf("v4!") || got[0].Size != 3 {
		t.Fatalf("take files = %+v", got)
	}
}
