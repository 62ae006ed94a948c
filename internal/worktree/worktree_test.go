package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/workspace"
)

// kinds runs a test once per kind; the overlay case is skipped when this
// host cannot mount one.
var kinds = []struct {
	name   string
	create func(shared, root, name string) (*Worktree, error)
}{
	{Overlay, testManager.Create},
	{Copy, testManager.CreateCopy},
}

func write(t testing.TB, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

// setup makes a shared workspace and a root whose worktrees are cleaned up,
// and checked unmounted, when the test ends.
func setup(t *testing.T) (shared, root string) {
	t.Helper()
	dir := t.TempDir()
	shared, root = filepath.Join(dir, "shared"), filepath.Join(dir, "root")
	write(t, filepath.Join(shared, "a.txt"), "a")
	write(t, filepath.Join(shared, "dir", "b.txt"), "b")
	write(t, filepath.Join(shared, "dir", "sub", "c.txt"), "c")
	if err := os.Symlink("a.txt", filepath.Join(shared, "link")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Cleanup(root); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
		if mps, _ := mountsUnder(dir); len(mps) > 0 {
			t.Errorf("left mounted: %v", mps)
		}
	})
	return shared, root
}

// open creates a worktree of the given kind, skipping an overlay that cannot
// be mounted here.
func open(t *testing.T, create func(string, string, string) (*Worktree, error), shared, root, name string) *Worktree {
	t.Helper()
	w, err := create(shared, root, name)
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind == Copy && w.Fallback != "" {
		w.Close()
		t.Skipf("overlay unavailable: %s", w.Fallback)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestLifecycle(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			shared, root := setup(t)
			w := open(t, k.create, shared, root, "agent1")
			if w.Kind != k.name {
				t.Fatalf("Kind = %q, want %q", w.Kind, k.name)
			}
			if got := read(t, filepath.Join(w.Dir, "dir", "sub", "c.txt")); got != "c" {
				t.Fatalf("view reads %q", got)
			}
			write(t, filepath.Join(w.Dir, "new", "n.txt"), "n")
			write(t, filepath.Join(w.Dir, "a.txt"), "a2")
			if err := os.Remove(filepath.Join(w.Dir, "dir", "b.txt")); err != nil {
				t.Fatal(err)
			}
			// A mode change alone (an overlay copy-up) is not a change.
			if err := os.Chmod(filepath.Join(w.Dir, "dir", "sub", "c.txt"), 0o600); err != nil {
				t.Fatal(err)
			}
			if read(t, filepath.Join(shared, "a.txt")) != "a" || exists(filepath.Join(shared, "new")) ||
				!exists(filepath.Join(shared, "dir", "b.txt")) {
				t.Fatal("shared changed before Merge")
			}
			want := []Change{
				{Path: "a.txt", Kind: Modified, Hash: workspace.HashBytes([]byte("a2"))},
				{Path: "dir/b.txt", Kind: Deleted},
				{Path: "new/n.txt", Kind: Created, Hash: workspace.HashBytes([]byte("n"))},
			}
			got, err := w.Changes()
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("Changes = %+v, %v\nwant %+v", got, err, want)
			}
			rep, err := w.Merge()
			if err != nil || len(rep.Applied) != 3 || len(rep.Conflicts)+len(rep.Refused) != 0 {
				t.Fatalf("Merge = %+v, %v", rep, err)
			}
			if read(t, filepath.Join(shared, "a.txt")) != "a2" || read(t, filepath.Join(shared, "new", "n.txt")) != "n" ||
				exists(filepath.Join(shared, "dir", "b.txt")) || read(t, filepath.Join(shared, "dir", "sub", "c.txt")) != "c" {
				t.Fatal("shared does not hold the merged changes")
			}
			if rep, err := w.Merge(); err != nil || len(rep.Applied)+len(rep.Conflicts) != 0 {
				t.Fatalf("second Merge = %+v, %v; want nothing to do", rep, err)
			}
		})
	}
}

func TestConflict(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			shared, root := setup(t)
			w := open(t, k.create, shared, root, "agent1")
			write(t, filepath.Join(w.Dir, "a.txt"), "ours")
			write(t, filepath.Join(w.Dir, "same.txt"), "same")
			os.Remove(filepath.Join(w.Dir, "dir", "b.txt"))
			// Another worktree merged these since Create.
			write(t, filepath.Join(shared, "a.txt"), "theirs")
			write(t, filepath.Join(shared, "same.txt"), "same")
			write(t, filepath.Join(shared, "dir", "b.txt"), "b2")

			rep, err := w.Merge()
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Applied) != 1 || rep.Applied[0].Path != "same.txt" {
				t.Errorf("Applied = %+v, want only same.txt (already identical)", rep.Applied)
			}
			if len(rep.Conflicts) != 2 {
				t.Fatalf("Conflicts = %+v, want a.txt and dir/b.txt", rep.Conflicts)
			}
			c := rep.Conflicts[0]
			if c.Path != "dir/b.txt" || c.OursHash != "" || c.Copy != "" {
				t.Errorf("deletion conflict = %+v", c)
			}
			c = rep.Conflicts[1]
			if c.Path != "a.txt" || c.TheirsHash != workspace.HashBytes([]byte("theirs")) ||
				c.OursHash != workspace.HashBytes([]byte("ours")) || c.Reason == "" {
				t.Errorf("conflict = %+v", c)
			}
			if read(t, filepath.Join(shared, "a.txt")) != "theirs" || read(t, filepath.Join(shared, "dir", "b.txt")) != "b2" {
				t.Error("a conflict overwrote shared")
			}
			if c.Copy != filepath.Join(root, "agent1", "conflicts", "a.txt") || read(t, c.Copy) != "ours" {
				t.Errorf("conflict copy %q not kept", c.Copy)
			}
			if err := w.Close(); err != nil || !exists(c.Copy) {
				t.Errorf("Close = %v; the conflict copy must stay for the lead", err)
			}
		})
	}
}

func TestTwoWorktrees(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			shared, root := setup(t)
			w1 := open(t, k.create, shared, root, "w1")
			w2 := open(t, k.create, shared, root, "w2")
			write(t, filepath.Join(w1.Dir, "a.txt"), "from w1")
			write(t, filepath.Join(w1.Dir, "both.txt"), "w1")
			write(t, filepath.Join(w2.Dir, "dir", "b.txt"), "from w2")
			write(t, filepath.Join(w2.Dir, "w2", "out.txt"), "w2 out")
			write(t, filepath.Join(w2.Dir, "both.txt"), "w2")
			if read(t, filepath.Join(w2.Dir, "a.txt")) != "a" {
				t.Fatal("w2 sees w1's change")
			}

			var wg sync.WaitGroup
			reps := make([]MergeReport, 2)
			for i, w := range []*Worktree{w1, w2} {
				wg.Go(func() {
					rep, err := w.Merge()
					if err != nil {
						t.Error(err)
					}
					reps[i] = rep
				})
			}
			wg.Wait()
			if n := len(reps[0].Applied) + len(reps[1].Applied); n != 4 {
				t.Errorf("applied %d changes, want 4: %+v", n, reps)
			}
			if n := len(reps[0].Conflicts) + len(reps[1].Conflicts); n != 1 {
				t.Errorf("%d conflicts, want 1 (both.txt, by whichever merged second): %+v", n, reps)
			}
			if read(t, filepath.Join(shared, "a.txt")) != "from w1" || read(t, filepath.Join(shared, "dir", "b.txt")) != "from w2" ||
				read(t, filepath.Join(shared, "w2", "out.txt")) != "w2 out" {
				t.Error("shared lacks a merged change")
			}
		})
	}
}

func TestDeletions(t *testing.T) {
	cases := []struct {
		name  string
		agent func(t *testing.T, dir string)
		check func(t *testing.T, shared string)
	}{
		{"remove a tree", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "dir"))
		}, func(t *testing.T, shared string) {
			if exists(filepath.Join(shared, "dir")) {
				t.Error("dir left in shared")
			}
		}},
		{"tree replaced by a file", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "dir"))
			write(t, filepath.Join(dir, "dir"), "file now")
		}, func(t *testing.T, shared string) {
			if read(t, filepath.Join(shared, "dir")) != "file now" {
				t.Error("dir is not the agent's file")
			}
		}},
		{"tree recreated (opaque)", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "dir"))
			write(t, filepath.Join(dir, "dir", "new.txt"), "new")
		}, func(t *testing.T, shared string) {
			if exists(filepath.Join(shared, "dir", "b.txt")) || exists(filepath.Join(shared, "dir", "sub")) ||
				read(t, filepath.Join(shared, "dir", "new.txt")) != "new" {
				t.Error("old content kept or new content missing")
			}
		}},
		{"remove a link", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "link"))
		}, func(t *testing.T, shared string) {
			if exists(filepath.Join(shared, "link")) || read(t, filepath.Join(shared, "a.txt")) != "a" {
				t.Error("link not removed, or its target touched")
			}
		}},
	}
	for _, k := range kinds {
		for _, tc := range cases {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				shared, root := setup(t)
				w := open(t, k.create, shared, root, "agent")
				tc.agent(t, w.Dir)
				rep, err := w.Merge()
				if err != nil || len(rep.Conflicts)+len(rep.Refused) != 0 || len(rep.Applied) == 0 {
					t.Fatalf("Merge = %+v, %v", rep, err)
				}
				tc.check(t, shared)
			})
		}
	}
}

func TestSymlinks(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			shared, root := setup(t)
			w := open(t, k.create, shared, root, "agent")
			for name, target := range map[string]string{
				"passwd": "/etc/passwd", "dir/up": "../../x", "dir/ok": "sub/c.txt",
			} {
				if err := os.Symlink(target, filepath.Join(w.Dir, filepath.FromSlash(name))); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := w.Merge()
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Refused) != 2 || rep.Refused[0].Path != "dir/up" || rep.Refused[1].Target != "/etc/passwd" {
				t.Errorf("Refused = %+v", rep.Refused)
			}
			if len(rep.Applied) != 1 || rep.Applied[0] != (Change{Path: "dir/ok", Kind: Symlink, Target: "sub/c.txt"}) {
				t.Errorf("Applied = %+v", rep.Applied)
			}
			if exists(filepath.Join(shared, "passwd")) || exists(filepath.Join(shared, "dir", "up")) {
				t.Error("an escaping link reached shared")
			}
			if read(t, filepath.Join(shared, "dir", "ok")) != "c" {
				t.Error("the inside link was not applied")
			}
		})
	}
}

func TestCloseUnmounts(t *testing.T) {
	shared, root := setup(t)
	w := open(t, testManager.Create, shared, root, "agent")
	if !mounted(t, w.Dir) {
		t.Fatal("overlay not in mountinfo")
	}
	for i := range 2 {
		if err := w.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if mounted(t, w.Dir) || exists(filepath.Join(root, "agent")) {
		t.Error("Close left the mount or the directory")
	}
	if _, err := w.Changes(); !errors.Is(err, ErrClosed) {
		t.Errorf("Changes after Close = %v", err)
	}
	if read(t, filepath.Join(shared, "a.txt")) != "a" {
		t.Error("Close touched shared")
	}
}

func TestCleanupAfterCrash(t *testing.T) {
	shared, root := setup(t)
	w := open(t, testManager.Create, shared, root, "crashed")
	write(t, filepath.Join(w.Dir, "a.txt"), "unmerged")
	if _, err := testManager.CreateCopy(shared, root, "copy"); err != nil {
		t.Fatal(err)
	}
	// The run dies here: nothing is closed.
	if err := Cleanup(root); err != nil {
		t.Fatal(err)
	}
	if mounted(t, w.Dir) {
		t.Error("Cleanup left the overlay mounted")
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("Cleanup left %v", entries)
	}
	if read(t, filepath.Join(shared, "a.txt")) != "a" {
		t.Error("Cleanup touched shared")
	}
}

func mounted(t *testing.T, dir string) bool {
	t.Helper()
	mps, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(mps) > 0
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`:  "/tmp/a b",
		`/tmp/tab\011`: "/tmp/tab\t",
		`/tmp/plain/`:  "/tmp/plain",
		`/tmp/x\`:      `/tmp/x\`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "a,b")
	write(t, filepath.Join(shared, "f"), "f")
	root := filepath.Join(dir, "root")
	defer Cleanup(root)

	w, err := testManager.Create(shared, root, "w")
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != Copy || !strings.Contains(w.Fallback, ",") || read(t, filepath.Join(w.Dir, "f")) != "f" {
		t.Errorf("a path overlayfs cannot take: Kind %q, Fallback %q", w.Kind, w.Fallback)
	}
	for _, bad := range []struct{ shared, root, name string }{
		{shared, root, "w"},                       // name in use
		{shared, root, "../x"},                    // not one element
		{shared, filepath.Join(shared, "r"), "x"}, // root inside shared
		{filepath.Join(dir, "nope"), root, "x"},   // no shared
	} {
		if _, err := testManager.Create(bad.shared, bad.root, bad.name); err == nil {
			t.Errorf("testManager.Create(%q, %q, %q) succeeded", bad.shared, bad.root, bad.name)
		}
	}
}

// testManager is the Manager of this package's tests.
var testManager = NewManager(nil)
