package repo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

type memBlobs map[string][]byte

func (m memBlobs) Put(b []byte) (string, error) {
	s := sha256.Sum256(b)
	h := hex.EncodeToString(s[:])
	m[h] = b
	return h, nil
}

func (m memBlobs) Get(h string) ([]byte, error) {
	b, ok := m[h]
	if !ok {
		return nil, errors.New("no blob " + h)
	}
	return b, nil
}

func put(t *testing.T, dir, p, text string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
	if err := os.WriteFile(filepath.Join(dir, p), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPlainTreeStageChangesApply(t *testing.T) {
	src, ws := t.TempDir(), t.TempDir()
	put(t, src, "a", "1\n")
	put(t, src, "d/b", "2\n")
	put(t, src, ".git/HEAD", "ref\n")
	paths, git, err := List(src, false)
	if err != nil || git || !reflect.DeepEqual(paths, []string{"a", "d/b"}) {
		t.Fatalf("List: %v %v %v", paths, git, err)
	}
	blobs := memBlobs{}
	files, err := Stage(src, paths, ws, blobs)
	if err != nil {
		t.Fatal(err)
	}
	b := &Baseline{Dir: src, Files: files}
	put(t, ws, "a", "1!\n")
	put(t, ws, "d/e/c", "3\n")
	os.Remove(filepath.Join(ws, "d/b"))
	ch, err := b.Changes(ws)
	if err != nil || len(ch) != 3 {
		t.Fatalf("Changes: %+v %v", ch, err)
	}
	// One conflict among three changes: nothing is written.
	put(t, src, "d/b", "2 changed\n")
	var ce *ConflictError
	if err := Apply(ch, ws, src); !errors.As(err, &ce) || !reflect.DeepEqual(ce.Paths, []string{"d/b"}) {
		t.Fatalf("Apply over a conflict: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "a")); string(got) != "1\n" {
		t.Fatalf("a refused apply wrote a: %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "d/e")); err == nil {
		t.Fatal("a refused apply created d/e")
	}
	put(t, src, "d/b", "2\n")
	if err := Apply(ch, ws, src); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "d/e/c")); string(got) != "3\n" {
		t.Fatalf("d/e/c is %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "d/b")); err == nil {
		t.Fatal("d/b was not deleted")
	}
	left, _ := filepath.Glob(filepath.Join(src, "*", ".apodex-apply-*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestHeaders(t *testing.T) {
	for in, want := range map[string]string{
		"diff --git b/n.txt b/n.txt":     "diff --git a/n.txt b/n.txt\n",
		"diff --git a/x y/z a/x y/z":     "diff --git a/x y/z b/x y/z\n",
		"diff --git a/s/f.txt b/s/f.txt": "diff --git a/s/f.txt b/s/f.txt\n",
		`diff --git "a/\303" "b/\303"`:   `diff --git "a/\303" "b/\303"` + "\n",
	} {
		if got := headers(in); got != want {
			t.Errorf("headers(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestApplyRefusesLinksAndDirectories(t *testing.T) {
	ws, target, outside := t.TempDir(), t.TempDir(), t.TempDir()
	put(t, ws, "d/f", "new\n")
	put(t, ws, "e", "new\n")
	ch := []Change{{Path: "d/f", New: &Entry{Path: "d/f", Mode: 0o644}}, {Path: "e", New: &Entry{Path: "e", Mode: 0o644}}}
	if err := os.Symlink(outside, filepath.Join(target, "d")); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ch, ws, target); err == nil {
		t.Fatal("an apply through a link in the target was not refused")
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Fatal("the apply wrote through the link")
	}
	os.Remove(filepath.Join(target, "d"))
	os.MkdirAll(filepath.Join(target, "e"), 0o755)
	if err := Apply(ch[:1], ws, target); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ch, ws, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(target, "d", "f"))
	if err := Apply(ch, ws, target); err == nil {
		t.Fatal("an apply onto a directory was not refused")
	}
	if _, err := os.Stat(filepath.Join(target, "d", "f")); err == nil {
		t.Fatal("a refused apply wrote d/f")
	}
}
