package world_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/world"
)

const manifest = `name: tiny
family: file
objective: Copy /inputs/a.txt to /outputs/a.txt.
deliverables:
  - path: /outputs/a.txt
verify:
  - kind: recompute
    command: cat /inputs/a.txt
    compare: /outputs/a.txt
`

// tiny writes a small hand-made world and returns its directory.
func tiny(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range map[string]string{
		"world.yaml": manifest, "inputs/a.txt": content, "solution/outputs/a.txt": content,
		"workspace/notes/n.txt": "start\n",
	} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSameContentSameID(t *testing.T) {
	st := world.NewStore(t.TempDir())
	a, fresh, err := st.Build(tiny(t, "x\n"))
	if err != nil || !fresh {
		t.Fatalf("build: %v (fresh %v)", err, fresh)
	}
	b, fresh, err := st.Build(tiny(t, "x\n"))
	if err != nil || fresh || b.ID != a.ID {
		t.Fatalf("same content in another directory: id %s (fresh %v, err %v), want %s stored once", b.ID, fresh, err, a.ID)
	}
	c, _, err := st.Build(tiny(t, "y\n"))
	if err != nil || c.ID == a.ID {
		t.Fatalf("another input byte kept the id %s (err %v)", c.ID, err)
	}
	if !strings.HasPrefix(a.ID, "w-") || len(a.ID) != 14 {
		t.Fatalf("id %q is not w- and 12 hex", a.ID)
	}
	got, err := st.Get(a.ID[:6])
	if err != nil || got.ID != a.ID {
		t.Fatalf("get by prefix: %v %v", got, err)
	}
	if _, err := st.Get("w-000000000000"); !errors.Is(err, world.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	ws, _ := st.List()
	if len(ws) != 2 {
		t.Fatalf("list: %d worlds, want 2", len(ws))
	}
}

func TestStoredWorldIsReadOnlyAndChecked(t *testing.T) {
	st := world.NewStore(t.TempDir())
	w, _, err := st.Build(tiny(t, "x\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"world.yaml", "inputs/a.txt", "inputs"} {
		fi, err := os.Stat(filepath.Join(w.Dir, p))
		if err != nil || fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable (%v, %v)", p, fi.Mode(), err)
		}
	}
	// Root ignores modes: a change is caught by the hash instead.
	p := filepath.Join(w.Dir, "inputs", "a.txt")
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("tampered\n"), 0o644)
	rep := world.Check(t.Context(), w, nil)
	if rep.OK || rep.Intact {
		t.Fatalf("a tampered world checked as usable: %+v", rep)
	}
}

func TestLoadRefusesBadManifests(t *testing.T) {
	for name, m := range map[string]string{
		"no name":       strings.Replace(manifest, "name: tiny\n", "", 1),
		"bad family":    strings.Replace(manifest, "family: file", "family: games", 1),
		"inputs key":    manifest + "inputs: elsewhere\n",
		"unknown key":   manifest + "colour: blue\n",
		"bad generator": manifest + "generator: {name: x, sed: 1}\n",
		"bad contract":  strings.Replace(manifest, "/outputs/a.txt\nverify", "/tmp/a.txt\nverify", 1),
		"not a mapping": "- a\n- b\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := tiny(t, "x\n")
			os.WriteFile(filepath.Join(dir, "world.yaml"), []byte(m), 0o644)
			if _, err := world.Load(dir); err == nil {
				t.Fatal("loaded")
			}
		})
	}
	dir := tiny(t, "x\n")
	os.Symlink("/etc/passwd", filepath.Join(dir, "inputs", "link"))
	if _, _, err := world.NewStore(t.TempDir()).Build(dir); err == nil {
		t.Fatal("stored a world holding a symlink")
	}
}

func TestStageIsFreshAndLeavesTheStore(t *testing.T) {
	st := world.NewStore(t.TempDir())
	w, _, err := st.Build(tiny(t, "x\n"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		runDir := filepath.Join(t.TempDir(), "run")
		os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
		r, err := world.Stage(w, runDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(r.Workspace, "notes", "n.txt")); string(b) != "start\n" {
			t.Fatalf("rollout %d starts with %q, want the stored workspace", i, b)
		}
		if len(r.Inputs) != 1 || r.Inputs[0].Path != "/inputs/a.txt" {
			t.Fatalf("inputs %+v", r.Inputs)
		}
		os.WriteFile(filepath.Join(r.Workspace, "notes", "n.txt"), []byte("changed\n"), 0o644)
		os.WriteFile(filepath.Join(r.Workspace, "new.txt"), []byte("new\n"), 0o644)
		if err := r.Finish(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(runDir, "workspace", "notes", "n.txt")); string(b) != "changed\n" {
			t.Fatalf("terminal workspace not kept: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(w.Workspace(), "notes", "n.txt")); string(b) != "start\n" {
			t.Fatalf("the rollout wrote into the store: %q", b)
		}
		if _, err := os.Stat(filepath.Join(w.Workspace(), "new.txt")); err == nil {
			t.Fatal("a rollout's new file reached the store")
		}
	}
	files, _ := world.Files(w.Dir)
	if world.ID(w.Manifest.Canonical, files) != w.ID {
		t.Fatal("rollouts changed the stored world's content")
	}
}

// F12: a stored world whose test was replaced (root ignores the store's
// read-only modes) is refused before a rollout starts, naming the file;
// so are a removed and an added file.
func TestStageRefusesAChangedWorld(t *testing.T) {
	cases := map[string]struct {
		change func(t *testing.T, dir string)
		want   string
	}{
		"replaced test": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, "tests", "check.sh")
			os.Remove(p)
			if err := os.WriteFile(p, []byte("exit 0\n"), 0o444); err != nil {
				t.Fatal(err)
			}
		}, "tests/check.sh is not the file stored"},
		"removed input": {func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "inputs", "a.txt")) }, "inputs/a.txt is missing"},
		"added file": {func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "tests", "conftest.py"), []byte("x\n"), 0o444)
		}, "holds tests/conftest.py, which its manifest does not list"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := tiny(t, "x\n")
			os.MkdirAll(filepath.Join(src, "tests"), 0o755)
			os.WriteFile(filepath.Join(src, "tests", "check.sh"), []byte("cmp /inputs/a.txt /outputs/a.txt\n"), 0o644)
			w, _, err := world.NewStore(t.TempDir()).Build(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Intact(); err != nil {
				t.Fatalf("a fresh world: %v", err)
			}
			tc.change(t, w.Dir)
			runDir := filepath.Join(t.TempDir(), "run")
			os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
			_, err = world.Stage(w, runDir, nil)
			if !errors.Is(err, world.ErrChanged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("stage of a changed world: %v; want it refused naming %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(runDir, "inputs")); err == nil {
				t.Error("the refused rollout was staged anyway")
			}
			if rep := world.Check(t.Context(), w, nil); rep.Intact || !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Errorf("worlds check: intact %v, problems %q", rep.Intact, rep.Problems)
			}
		})
	}
}
