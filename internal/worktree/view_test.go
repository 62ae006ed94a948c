package worktree

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCreateViewIsPrivateAndCleansUp(t *testing.T) {
	lower, root := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(lower, "a.txt"), []byte("a\n"), 0o644)
	v, err := testManager.CreateView(lower, root, "v")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(v.Dir, "a.txt")); string(b) != "a\n" {
		t.Fatalf("view shows %q", b)
	}
	os.WriteFile(filepath.Join(v.Dir, "a.txt"), []byte("changed\n"), 0o644)
	os.WriteFile(filepath.Join(v.Dir, "b.txt"), []byte("b\n"), 0o644)
	if b, _ := os.ReadFile(filepath.Join(lower, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a write in the view reached lower: %q", b)
	}
	if _, err := os.Stat(filepath.Join(lower, "b.txt")); err == nil {
		t.Fatal("a new file in the view reached lower")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "v")); err == nil {
		t.Fatal("Close left the view behind")
	}
}
