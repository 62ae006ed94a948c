package runfiles_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/runfiles"
)

const world = "w-0123456789ab"

// layered makes a home with a stored world's workspace and a run over it:
// the world holds a.txt, d/b.txt, d/c.txt, gone/x.txt, op/old.txt,
// flat/y.txt; the run changed a.txt, removed d/c.txt and gone/, emptied
// op/ and wrote op/new.txt, and wrote flat as a file.
func layered(t *testing.T) (home, runDir string) {
	t.Helper()
	home = t.TempDir()
	base := filepath.Join(home, "worlds", world, "workspace")
	runDir = filepath.Join(home, "runs", "r-1")
	write := func(root string, files map[string]string) {
		for rel, body := range files {
			p := filepath.Join(root, filepath.FromSlash(rel))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(base, map[string]string{"a.txt": "a0", "d/b.txt": "b0", "d/c.txt": "c0", "gone/x.txt": "x0", "op/old.txt": "old", "flat/y.txt": "y0"})
	write(filepath.Join(runDir, "workspace"), map[string]string{"a.txt": "a1", "op/new.txt": "new", "flat": "flat", "d/n.txt": "n1"})
	if err := runfiles.WriteBase(runDir, runfiles.Base{World: world, Removed: []string{"gone", "d/c.txt"}, Opaque: []string{"op"}}); err != nil {
		t.Fatal(err)
	}
	return home, runDir
}

// Every path reads as the rollout left it: changed and new files from the
// run, untouched ones from the world, removed ones (and what is below a
// removed or emptied directory, or below a file put in place of a
// directory) not at all; outputs read as they are.
func TestReadsAsTheRolloutLeftIt(t *testing.T) {
	_, runDir := layered(t)
	os.MkdirAll(filepath.Join(runDir, "outputs"), 0o755)
	os.WriteFile(filepath.Join(runDir, "outputs", "r.md"), []byte("report"), 0o644)
	for name, want := range map[string]string{
		"workspace/a.txt": "a1", "workspace/d/b.txt": "b0", "workspace/d/n.txt": "n1",
		"workspace/op/new.txt": "new", "workspace/flat": "flat", "outputs/r.md": "report",
	} {
		if got, err := runfiles.ReadFile(runDir, name, 0); err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"workspace/d/c.txt", "workspace/gone/x.txt", "workspace/op/old.txt", "workspace/flat/y.txt", "workspace/none", "outputs/none"} {
		if got, err := runfiles.ReadFile(runDir, name, 0); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %q %v, want not found", name, got, err)
		}
	}
	if _, err := runfiles.ReadFile(runDir, "workspace/d", 0); !errors.Is(err, hostfs.ErrNotRegular) {
		t.Errorf("a directory of the world reads: %v", err)
	}
	tree := filepath.Join(t.TempDir(), "tree")
	n, err := runfiles.Materialize(runDir, tree, true)
	if err != nil || n != 5 {
		t.Fatalf("materialized %d files (%v), want 5", n, err)
	}
	var got []string
	filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(tree, p)
			b, _ := os.ReadFile(p)
			got = append(got, filepath.ToSlash(rel)+"="+string(b))
		}
		return nil
	})
	if want := "a.txt=a1 d/b.txt=b0 d/n.txt=n1 flat=flat op/new.txt=new"; strings.Join(got, " ") != want {
		t.Errorf("tree %v, want %s", got, want)
	}
	if _, err := runfiles.Materialize(runDir, tree, false); err == nil {
		t.Error("materialized into a directory that is not empty")
	}
}

// A link is never followed, neither among the run's changes nor in the
// world; a base that is not plainly one (a path out of the world, no
// world id) is refused, not used; a world no longer stored is named.
func TestBaseCannotLeadOutside(t *testing.T) {
	home, runDir := layered(t)
	secret := filepath.Join(home, "secret")
	os.WriteFile(secret, []byte("secret"), 0o644)
	os.Symlink(secret, filepath.Join(runDir, "workspace", "l.txt"))
	os.Symlink(secret, filepath.Join(home, "worlds", world, "workspace", "d", "l.txt"))
	for _, name := range []string{"workspace/l.txt", "workspace/d/l.txt"} {
		if _, err := runfiles.ReadFile(runDir, name, 0); !errors.Is(err, hostfs.ErrLink) {
			t.Errorf("%s: %v, want the link refused", name, err)
		}
	}
	for _, body := range []string{`{"world":"../../secret"}`, `{"world":"w-0123456789ab","removed":["../x"]}`, `{"world":"w-0123456789ab","opaque":["/etc"]}`, `not json`} {
		os.WriteFile(filepath.Join(runDir, runfiles.BaseFile), []byte(body), 0o644)
		if _, err := runfiles.ReadFile(runDir, "workspace/d/b.txt", 0); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("base %s: %v, want refused", body, err)
		}
		if got, err := runfiles.ReadFile(runDir, "workspace/a.txt", 0); err != nil || string(got) != "a1" {
			t.Errorf("base %s: a changed file reads %q %v", body, got, err)
		}
	}
	runfiles.WriteBase(runDir, runfiles.Base{World: world})
	os.RemoveAll(filepath.Join(home, "worlds"))
	if _, err := runfiles.ReadFile(runDir, "workspace/d/b.txt", 0); !errors.Is(err, runfiles.ErrBaseMissing) || !strings.Contains(err.Error(), world) {
		t.Errorf("a world no longer stored: %v", err)
	}
	if _, err := runfiles.Materialize(runDir, filepath.Join(t.TempDir(), "t"), false); !errors.Is(err, runfiles.ErrBaseMissing) {
		t.Errorf("materialized without the world: %v", err)
	}
}

// A run without a base reads its workspace/ as the whole tree.
func TestWholeWorkspaceReadsAsItIs(t *testing.T) {
	runDir := t.TempDir()
	os.MkdirAll(filepath.Join(runDir, "workspace", "d"), 0o755)
	os.WriteFile(filepath.Join(runDir, "workspace", "d", "f"), []byte("f"), 0o755)
	if got, err := runfiles.ReadFile(runDir, "workspace/d/f", 0); err != nil || string(got) != "f" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := runfiles.ReadFile(runDir, "workspace/d/f/g", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("below a file: %v, want not found", err)
	}
	tree := filepath.Join(t.TempDir(), "tree")
	if n, err := runfiles.Materialize(runDir, tree, true); err != nil || n != 1 {
		t.Fatalf("%d %v", n, err)
	}
	if fi, err := os.Stat(filepath.Join(tree, "d", "f")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("an executable copied as %v %v", fi, err)
	}
}
