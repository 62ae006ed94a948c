package world_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/worktree"
	"github.com/apodex/apodex/internal/world"
)

// lstatEntry is the watch's Entry of p, taken by the test itself.
func lstatEntry(t *testing.T, p string) watch.Entry {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return watch.Entry{Size: st.Size, Blocks: st.Blocks, Ino: st.Ino, MTime: st.Mtim.Nano(), Mode: fi.Mode(), UID: st.Uid, GID: st.Gid}
}

// The watch of a rollout's workspace is filled from the store's manifest
// and seal, and what it is filled with is what the overlay shows: every
// file's stat, blocks and owner (idmapped or not) as an lstat through the
// overlay gives them, its hash as stored. So quotas (the tree's usage),
// the sandbox's ownership step and produced files start from the truth
// without a stat per file; a change through the overlay is then seen.
func TestRolloutWatchIsFilledAsTheOverlayShows(t *testing.T) {
	w := storedWithFiles(t, 120)
	stored := map[string]watch.Sum{}
	for _, f := range w.Files {
		if rel, ok := strings.CutPrefix(f.Path, "workspace/"); ok {
			stored[rel] = watch.Sum(f.SHA256)
		}
	}
	p, ok := world.PrefillOf(w)
	if !ok {
		t.Fatal("a world stored now has no prefill (a v2 seal with one owner)")
	}
	wm := worktree.NewManager(nil)
	defer wm.Close()
	if os.Geteuid() == 0 {
		wm.OwnViews(65534, 65534)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
	r, err := world.Stage(w, runDir, wm)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Finish()
	if r.Record.Sandbox != world.SandboxOverlay {
		t.Skipf("no overlay here (%s)", r.Record.Fallback)
	}
	// The prefill is the overlay's truth (but owners, which the fill
	// takes from the stat of one file; the tree's entries, compared
	// below, have them).
	n := 0
	for i := -1; i < len(p.Dirs); i++ {
		dir := ""
		if i >= 0 {
			dir = p.Dirs[i]
		}
		p.Files(i, func(name string, e watch.Entry, sum watch.Sum) bool {
			rel := filepath.Join(dir, name)
			got := lstatEntry(t, filepath.Join(r.Workspace, rel))
			if e.UID, e.GID = got.UID, got.GID; e != got {
				t.Errorf("%s: prefilled %+v, the overlay shows %+v", rel, e, got)
			}
			if want := stored[filepath.ToSlash(rel)]; sum != want {
				t.Errorf("%s: prefilled hash %x, stored %x", rel, sum, want)
			}
			n++
			return true
		})
	}
	for _, d := range p.Dirs {
		if fi, err := os.Lstat(filepath.Join(r.Workspace, d)); err != nil || !fi.IsDir() {
			t.Errorf("prefilled directory %s: %v", d, err)
		}
	}
	if n != 122 || len(p.Dirs) != 8 { // 120 files in pkg0..6, notes/n.txt, README.md
		t.Fatalf("prefill of %d files, %d directories", n, len(p.Dirs))
	}
	tr, err := wm.Watch().For(r.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	var blocks, apparent, count int64
	filepath.WalkDir(r.Workspace, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == r.Workspace {
			return err
		}
		rel, _ := filepath.Rel(r.Workspace, path)
		e := lstatEntry(t, path)
		if got, ok := tr.Entry(filepath.ToSlash(rel)); !ok || got != e {
			t.Errorf("the tree's %s: %+v, the overlay's %+v", rel, got, e)
		}
		count++
		blocks += e.Blocks * 512
		if e.Mode.IsRegular() {
			apparent += e.Size
		}
		return nil
	})
	if b, a, c := tr.Usage(); b != blocks || a != apparent || c != count {
		t.Errorf("usage %d/%d/%d, want the walk's %d/%d/%d", b, a, c, blocks, apparent, count)
	}
	m := tr.Mark()
	defer m.Close()
	if err := os.WriteFile(filepath.Join(r.Workspace, "pkg1", "new.py"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(r.Workspace, "pkg2", "f002.py")); err != nil {
		t.Fatal(err)
	}
	changes := m.TakeFiles()
	if len(changes) != 2 || changes[0].Rel != "pkg1/new.py" || !changes[0].Has || changes[1].Rel != "pkg2/f002.py" || !changes[1].Had || changes[1].Has {
		t.Errorf("changes through the overlay: %+v", changes)
	}
	if _, _, c := tr.Usage(); c != count {
		t.Errorf("%d entries after one added and one removed, want %d", c, count)
	}
}

// A world stored before the v2 seal (a v1 seal: no blocks, no owner) is
// still proven intact by its seal without a read, and its rollout's watch
// walks the workspace instead of being filled, with the stored hashes.
func TestV1SealedWorldStillRuns(t *testing.T) {
	w := storedWithFiles(t, 40)
	if err := world.WriteSealV1(w); err != nil {
		t.Fatal(err)
	}
	w, err := (&world.Store{Dir: filepath.Dir(w.Dir)}).Get(w.ID) // the seal is read once per loaded world
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := world.PrefillOf(w); ok {
		t.Fatal("a v1 seal gave a prefill")
	}
	hashed := world.Hashed()
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
	wm := worktree.NewManager(nil)
	defer wm.Close()
	r, err := world.Stage(w, runDir, wm)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Finish()
	if err := r.Intact(); err != nil {
		t.Fatalf("a v1-sealed world: %v", err)
	}
	if d := world.Hashed() - hashed; d != 0 {
		t.Errorf("proving a v1-sealed world hashed %d files, want 0", d)
	}
	if r.Record.Sandbox != world.SandboxOverlay {
		t.Skipf("no overlay here (%s)", r.Record.Fallback)
	}
	tr, err := wm.Watch().For(r.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	files, more := tr.Files(1000)
	if len(files) != 42 || more != 0 {
		t.Errorf("the walked tree lists %d files (%d more), want 42", len(files), more)
	}
	for _, f := range files {
		if want := watch.Sum(fileHash(t, w, "workspace/"+f.Rel)); !f.Hashed || f.Sum != want {
			t.Errorf("%s: %x, want the stored hash", f.Rel, f.Sum)
		}
	}
}

// fileHash is the stored hash of the world's file p.
func fileHash(t *testing.T, w *world.World, p string) world.Hash {
	t.Helper()
	for _, f := range w.Files {
		if f.Path == p {
			return f.SHA256
		}
	}
	t.Fatalf("%s is not stored", p)
	return world.Hash{}
}
