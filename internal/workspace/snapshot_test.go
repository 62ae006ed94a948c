package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestSnapshotDiff(t *testing.T) {
	fs, _ := testFS(t)
	ws := fs.Workspace
	write(t, filepath.Join(ws, "same.txt"), "same\n")
	symlink(t, "a.txt", filepath.Join(ws, "link"))
	before, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	if before.Len() != 4 {
		t.Fatalf("snapshot has %d files, want 4 (links are not files)", before.Len())
	}
	if empty := Diff(before, before); len(empty) != 0 {
		t.Fatalf("Diff of a snapshot with itself: %v", empty)
	}

	oldA := HashBytes([]byte("alpha\n"))
	oldB := HashBytes([]byte("beta\n"))
	write(t, filepath.Join(ws, "a.txt"), "ALPHA\n") // same size, right after hashing
	if err := os.Remove(filepath.Join(ws, "sub", "b.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "new", "c.txt"), "gamma!\n")
	if err := os.Chmod(filepath.Join(ws, "same.txt"), 0o600); err != nil {
		t.Fatal(err)
	}

	after, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{
		{Path: "/workspace/a.txt", Before: oldA, After: HashBytes([]byte("ALPHA\n")), Bytes: 6},
		{Path: "/workspace/new/c.txt", After: HashBytes([]byte("gamma!\n")), Bytes: 7},
		{Path: "/workspace/sub/b.txt", Before: oldB},
	}
	got := Diff(before, after)
	for i := range got {
		if got[i].After != "" && got[i].MTime.IsZero() {
			t.Errorf("%s: no mtime", got[i].Path)
		}
		got[i].MTime = time.Time{} // compared by content below
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %+v\nwant %+v", got, want)
	}
	if h, n, ok := after.Hash("/workspace/new/c.txt"); !ok || n != 7 || h != want[1].After {
		t.Fatalf("Hash = %q %d %v", h, n, ok)
	}
}

// A rewrite that leaves size and mtime as they were is still seen, because a
// hash taken within racySlack of the mtime is not trusted.
func TestSnapshotSameStatRewrite(t *testing.T) {
	fs, _ := testFS(t)
	name := filepath.Join(fs.Workspace, "a.txt")
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	before, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	write(t, name, "ALPHA\n")
	if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(before, after); len(d) != 1 || d[0].Path != "/workspace/a.txt" {
		t.Fatalf("Diff = %+v, want the rewrite of a.txt", d)
	}
}

// Files whose stat is unchanged and old enough are not hashed again: the
// cached hash is what the next snapshot reports.
func TestSnapshotUsesCache(t *testing.T) {
	fs, _ := testFS(t)
	old := time.Now().Add(-time.Hour)
	name := filepath.Join(fs.Workspace, "a.txt")
	if err := os.Chtimes(name, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Snapshot(Workspace); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	e := fs.hashes[Workspace]["a.txt"]
	e.hash = "sha256:cached"
	fs.hashes[Workspace]["a.txt"] = e
	fs.mu.Unlock()
	s, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := s.Hash("/workspace/a.txt"); h != "sha256:cached" {
		t.Fatalf("hash %q: an unchanged file was hashed again", h)
	}
}

func TestSnapshotUnknownPlane(t *testing.T) {
	fs, _ := testFS(t)
	if _, err := fs.Snapshot("elsewhere"); err == nil {
		t.Fatal("no error for an unknown plane")
	}
}

func BenchmarkSnapshotSmall(b *testing.B) {
	base := b.TempDir()
	fs := &FS{Inputs: base, Workspace: filepath.Join(base, "ws"), Outputs: base}
	for i := range 50 {
		name := filepath.Join(fs.Workspace, "d"+string(rune('a'+i%5)), "f"+string(rune('a'+i%26))+".txt")
		os.MkdirAll(filepath.Dir(name), 0o755)
		os.WriteFile(name, make([]byte, 4096), 0o644)
	}
	old := time.Now().Add(-time.Hour)
	filepath.Walk(fs.Workspace, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, old, old) })
	before, _ := fs.Snapshot(Workspace)
	b.ResetTimer()
	for b.Loop() {
		after, err := fs.Snapshot(Workspace)
		if err != nil {
			b.Fatal(err)
		}
		Diff(before, after)
	}
}

func TestChangesIgnoresSharedShowingThrough(t *testing.T) {
	fs, _ := testFS(t)
	shared := t.TempDir()
	fs.Shared = shared
	mine := filepath.Join(fs.Workspace, "mine.txt")
	theirs := filepath.Join(fs.Workspace, "theirs.txt")
	before, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(mine, []byte("mine\n"), 0o644)
	// Another agent's merge shows through the copy-on-write view.
	os.WriteFile(filepath.Join(shared, "theirs.txt"), []byte("theirs\n"), 0o644)
	os.WriteFile(theirs, []byte("theirs\n"), 0o644)
	after, err := fs.Snapshot(Workspace)
	if err != nil {
		t.Fatal(err)
	}
	got := fs.Changes(before, after)
	if len(got) != 1 || got[0].Path != "/workspace/mine.txt" {
		t.Fatalf("changes %+v, want only /workspace/mine.txt", got)
	}
	fs.Shared = ""
	if n := len(fs.Changes(before, after)); n != 2 {
		t.Fatalf("without Shared, %d changes, want 2", n)
	}
}
