package world_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
	"github.com/apodex/apodex/internal/world"
)

// storedWithFiles stores a world whose workspace holds n files in pkg0-6,
// notes/n.txt and README.md.
func storedWithFiles(t *testing.T, n int) *world.World {
	t.Helper()
	src := tiny(t, "x\n")
	os.WriteFile(filepath.Join(src, "workspace", "README.md"), []byte("read me\n"), 0o644)
	for i := range n {
		p := filepath.Join(src, "workspace", fmt.Sprintf("pkg%d", i%7), fmt.Sprintf("f%03d.py", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("x = %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := world.NewStore(t.TempDir()).Build(src)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// runDirOf is a fresh run directory in w's home (<home>/runs/<id>, beside
// <home>/worlds/<id>), as apodex makes them.
func runDirOf(t *testing.T, w *world.World) string {
	t.Helper()
	runs := filepath.Join(filepath.Dir(filepath.Dir(w.Dir)), "runs")
	os.MkdirAll(runs, 0o755)
	dir, err := os.MkdirTemp(runs, "r-")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "workspace"), 0o755)
	return dir
}

// regularFiles counts the regular files below dir.
func regularFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// A rollout that touches nothing: staging proves the world intact from its
// seal without reading a file, and finishing moves nothing out of the
// overlay and makes nothing per file of the world: the run keeps no file,
// only its base (the world, nothing removed), and reads every file from
// the store; materialized, the tree is the store's, linked.
func TestUntouchedWorldIsNeitherHashedNorCopied(t *testing.T) {
	w := storedWithFiles(t, 200)
	hashed, moved := world.Hashed(), world.Moved()
	runDir := runDirOf(t, w)
	r, err := world.Stage(w, runDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Record.Sandbox != world.SandboxOverlay {
		t.Skipf("no overlay here (%s): the copy fallback copies by design", r.Record.Fallback)
	}
	// The rollout's watch takes every file's hash from the manifest: the
	// overlay shows each stored file with the inode and times the seal
	// recorded.
	known := world.Known(w)
	for _, f := range w.Files {
		rel, ok := strings.CutPrefix(f.Path, "workspace/")
		if !ok {
			continue
		}
		fi, err := os.Lstat(filepath.Join(r.Workspace, rel))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		sum, ok := known(rel, watch.Entry{Size: fi.Size(), Ino: st.Ino, MTime: st.Mtim.Nano(), Mode: fi.Mode()})
		if !ok || sum != watch.Sum(f.SHA256) {
			t.Fatalf("%s through the overlay is not known from the manifest (%v)", rel, ok)
		}
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if d := world.Hashed() - hashed; d != 0 {
		t.Errorf("staging an intact sealed world hashed %d files, want 0", d)
	}
	if d := world.Moved() - moved; d != 0 {
		t.Errorf("finishing an untouched world moved %d files, want 0", d)
	}
	if err := w.Intact(); err != nil {
		t.Errorf("the world after a rollout: %v", err)
	}
	if d := world.Hashed() - hashed; d != 0 {
		t.Errorf("a trainability check of an unchanged world hashed %d files, want 0", d)
	}
	if n := regularFiles(t, filepath.Join(runDir, "workspace")); n != 0 {
		t.Errorf("the run's workspace/ holds %d files after an untouched rollout, want none", n)
	}
	b, err := runfiles.ReadBase(runDir)
	if err != nil || b == nil || b.World != w.ID || len(b.Removed)+len(b.Opaque) != 0 {
		t.Fatalf("base %+v %v, want world %s and nothing removed", b, err, w.ID)
	}
	for rel, want := range map[string]string{"pkg3/f003.py": "x = 3\n", "pkg3/f199.py": "x = 199\n", "README.md": "read me\n"} {
		if got, err := runfiles.ReadFile(runDir, "workspace/"+rel, 0); err != nil || string(got) != want {
			t.Errorf("%s reads %q %v, want %q", rel, got, err, want)
		}
	}
	want := 0
	for _, f := range w.Files {
		if strings.HasPrefix(f.Path, "workspace/") {
			want++
		}
	}
	tree := filepath.Join(t.TempDir(), "tree")
	n, err := runfiles.Materialize(runDir, tree, false)
	if err != nil || n != want || n < 200 {
		t.Fatalf("materialized %d files (%v), want the world's %d", n, err, want)
	}
	for _, rel := range []string{"pkg3/f003.py", "pkg3/f199.py", "notes/n.txt"} {
		a, err1 := os.Stat(filepath.Join(tree, rel))
		b, err2 := os.Stat(filepath.Join(w.Workspace(), rel))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not materialized as a link to the store: %v %v", rel, err1, err2)
		}
	}
}

// What a rollout changed is delivered, and only that is moved: a rewritten
// file, a new file in a new directory; a removed file, a removed
// directory's files, the files of a directory replaced by a file and a
// file replaced by a link are absent; the store is unchanged. The run
// keeps the changes and its base (read through runfiles, materialized);
// a run outside the world's home (no base can name it) gets the whole
// tree, untouched files linked. So too when the rollout released the
// world's list before it finished (Release).
func TestFinishDeliversOnlyTheChanges(t *testing.T) {
	for _, release := range []bool{false, true} {
		for _, home := range []bool{true, false} {
			t.Run(fmt.Sprintf("release=%v_home=%v", release, home), func(t *testing.T) { finishDelivers(t, release, home) })
		}
	}
}

func finishDelivers(t *testing.T, release, home bool) {
	w := storedWithFiles(t, 30)
	runDir := runDirOf(t, w)
	if !home {
		runDir = filepath.Join(t.TempDir(), "elsewhere", "run")
		os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
	}
	r, err := world.Stage(w, runDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Record.Sandbox != world.SandboxOverlay {
		t.Skipf("no overlay here (%s)", r.Record.Fallback)
	}
	moved := world.Moved()
	os.WriteFile(filepath.Join(r.Workspace, "pkg1", "f001.py"), []byte("changed\n"), 0o644)
	os.MkdirAll(filepath.Join(r.Workspace, "new", "deep"), 0o755)
	os.WriteFile(filepath.Join(r.Workspace, "new", "deep", "n.py"), []byte("new\n"), 0o644)
	os.Remove(filepath.Join(r.Workspace, "pkg2", "f002.py"))
	if err := os.RemoveAll(filepath.Join(r.Workspace, "pkg3")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(r.Workspace, "pkg3"), 0o755) // opaque: lower's pkg3 stays hidden
	os.WriteFile(filepath.Join(r.Workspace, "pkg3", "only.py"), []byte("only\n"), 0o644)
	os.RemoveAll(filepath.Join(r.Workspace, "pkg5")) // a file where a directory was
	os.WriteFile(filepath.Join(r.Workspace, "pkg5"), []byte("flat\n"), 0o644)
	os.Remove(filepath.Join(r.Workspace, "pkg6", "f006.py")) // a link where a file was: not kept
	if err := os.Symlink("/etc/passwd", filepath.Join(r.Workspace, "pkg6", "f006.py")); err != nil {
		t.Fatal(err)
	}
	var unchanged []string // the workspace files the rollout left as stored
	for _, f := range w.Files {
		if rel, ok := strings.CutPrefix(f.Path, "workspace/"); ok && !strings.HasPrefix(rel, "pkg3/") && !strings.HasPrefix(rel, "pkg5/") &&
			rel != "pkg1/f001.py" && rel != "pkg2/f002.py" && rel != "pkg6/f006.py" {
			unchanged = append(unchanged, rel)
		}
	}
	if release {
		r.Release()
		if w.Files != nil {
			t.Fatal("Release kept the world's file list")
		}
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	base, err := runfiles.ReadBase(runDir)
	switch {
	case err != nil:
		t.Fatal(err)
	case home && (base == nil || !slices.Equal(base.Removed, []string{"pkg2/f002.py", "pkg6/f006.py"}) || !slices.Equal(base.Opaque, []string{"pkg3"})):
		t.Errorf("base %+v, want pkg2/f002.py and pkg6/f006.py removed, pkg3 opaque", base)
	case home && regularFiles(t, filepath.Join(runDir, "workspace")) != 4:
		t.Errorf("the run's workspace/ holds %d files, want the 4 the rollout wrote", regularFiles(t, filepath.Join(runDir, "workspace")))
	case !home && base != nil:
		t.Errorf("a run outside the world's home has a base %+v", base)
	}
	for rel, want := range map[string]string{"pkg1/f001.py": "changed\n", "new/deep/n.py": "new\n", "pkg3/only.py": "only\n", "pkg4/f004.py": "x = 4\n", "pkg5": "flat\n"} {
		if b, err := runfiles.ReadFile(runDir, "workspace/"+rel, 0); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", rel, b, err, want)
		}
	}
	tree := filepath.Join(runDir, "workspace")
	if home {
		tree = filepath.Join(t.TempDir(), "tree")
		if _, err := runfiles.Materialize(runDir, tree, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range unchanged {
		a, err1 := os.Stat(filepath.Join(tree, rel))
		b, err2 := os.Stat(filepath.Join(w.Workspace(), rel))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not a link to the store: %v %v", rel, err1, err2)
		}
		if got, err := runfiles.ReadFile(runDir, "workspace/"+rel, 0); err != nil || len(got) == 0 {
			t.Errorf("%s reads %q %v", rel, got, err)
		}
	}
	if len(unchanged) < 20 {
		t.Fatalf("only %d unchanged files", len(unchanged))
	}
	for _, rel := range []string{"pkg2/f002.py", "pkg3/f003.py", "pkg3/f010.py", "pkg5/f005.py", "pkg6/f006.py"} {
		if _, err := os.Lstat(filepath.Join(tree, rel)); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("%s was removed by the rollout but is in its terminal tree (%v)", rel, err)
		}
		if _, err := runfiles.ReadFile(runDir, "workspace/"+rel, 0); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was removed by the rollout but reads (%v)", rel, err)
		}
	}
	if d := world.Moved() - moved; d != 4 {
		t.Errorf("finish moved %d files, want the 4 the rollout wrote", d)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Workspace(), "pkg1", "f001.py")); string(b) != "x = 1\n" {
		t.Errorf("the store changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(runDir, "world")); err == nil {
		t.Error("the overlay's directory is left behind")
	}
}

// A store file rewritten in place (same size, same inode: only its times
// tell) behind the runtime's back: the rollout stages (its directories are
// as sealed; the files' stats are checked while it runs) but its Intact,
// which the run asks before verifying, refuses it, naming the file.
func TestRolloutRefusesAFileRewrittenInPlace(t *testing.T) {
	w := storedWithFiles(t, 5)
	p := filepath.Join(w.Dir, "inputs", "a.txt")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		os.Chmod(p, 0o644)
		if f, err = os.OpenFile(p, os.O_WRONLY, 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(p, 0o444)
	}
	f.Write([]byte("y\n"))
	f.Close()
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
	r, err := world.Stage(w, runDir, nil)
	if err != nil {
		t.Fatalf("stage of a world whose directories are as sealed: %v", err)
	}
	defer r.Finish()
	for range 2 { // the same answer each time it is asked
		if err := r.Intact(); !errors.Is(err, world.ErrChanged) || !strings.Contains(err.Error(), "inputs/a.txt is not the file stored") {
			t.Fatalf("the rollout of a world rewritten in place: %v", err)
		}
	}
}

// As root, a rollout staged with a Manager that owns views for the sandbox
// uid records how it owns the lower layer.
func TestStageRecordsTheIDMap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root")
	}
	w := storedWithFiles(t, 3)
	wm := worktree.NewManager(nil)
	defer wm.Close()
	wm.OwnViews(65534, 65534)
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
	r, err := world.Stage(w, runDir, wm)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Finish()
	if r.Record.IDMap != worktree.IDMapped && !strings.HasPrefix(r.Record.IDMap, "none: ") {
		t.Fatalf("record idmap %q", r.Record.IDMap)
	}
	fi, err := os.Stat(filepath.Join(r.Workspace, "pkg0", "f000.py"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; r.Record.IDMap == worktree.IDMapped && uid != 65534 {
		t.Errorf("idmapped, but a file shows owner %d", uid)
	}
}

// A run's tree materialized (apodex workspace --to) links the store's
// files, so a stored file has several links; the next rollout of the world still
// edits it with the file tools: through the overlay a write copies it up
// and never changes the store or the earlier run. A hard link made inside
// the workspace is still refused.
func TestNextRolloutWritesAFileAnEarlierOneLinked(t *testing.T) {
	w := storedWithFiles(t, 10)
	stage := func() (*world.Rollout, string) {
		runDir := runDirOf(t, w)
		r, err := world.Stage(w, runDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Record.Sandbox != world.SandboxOverlay {
			t.Skipf("no overlay here (%s)", r.Record.Fallback)
		}
		return r, runDir
	}
	first, firstDir := stage()
	if err := first.Finish(); err != nil {
		t.Fatal(err)
	}
	firstTree := filepath.Join(t.TempDir(), "tree")
	if _, err := runfiles.Materialize(firstDir, firstTree, false); err != nil {
		t.Fatal(err)
	}
	r, _ := stage()
	defer r.Finish()
	if fi, err := os.Stat(filepath.Join(r.Workspace, "pkg1", "f001.py")); err != nil || fi.Sys().(*syscall.Stat_t).Nlink < 2 {
		t.Fatalf("the stored file is not linked by the first rollout's tree (%v)", err)
	}
	fs := (&workspace.FS{Inputs: t.TempDir(), Workspace: r.Workspace, Outputs: t.TempDir(), Upper: r.Upper}).View(nil) // an agent's view, as the tools get it
	p, err := fs.ResolveWrite("/workspace/pkg1/f001.py")
	if err != nil {
		t.Fatalf("a stored file linked by an earlier rollout: %v", err)
	}
	if err := fs.WriteFile(p, []byte("fixed\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Workspace, "pkg1", "f001.py")); string(b) != "fixed\n" {
		t.Errorf("the rollout reads %q", b)
	}
	for _, f := range []string{filepath.Join(w.Workspace(), "pkg1", "f001.py"), filepath.Join(firstTree, "pkg1", "f001.py")} {
		if b, _ := os.ReadFile(f); string(b) != "x = 1\n" {
			t.Errorf("%s changed: %q", f, b)
		}
	}
	if err := os.Link(filepath.Join(r.Workspace, "pkg2", "f002.py"), filepath.Join(r.Workspace, "pkg2", "twin.py")); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ResolveWrite("/workspace/pkg2/twin.py"); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Errorf("a hard link made in the workspace: %v, want refused", err)
	}
}

// stageOverlay stages a rollout of w in a run directory of its home with
// a manager of the test's own (both ended with the test), skipping the
// test where no overlay can be mounted.
func stageOverlay(t *testing.T, w *world.World) (*world.Rollout, *worktree.Manager) {
	t.Helper()
	wm := worktree.NewManager(nil)
	t.Cleanup(wm.Close)
	r, err := world.Stage(w, runDirOf(t, w), wm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Finish() })
	if r.Record.Sandbox != world.SandboxOverlay {
		t.Skipf("no overlay here (%s)", r.Record.Fallback)
	}
	return r, wm
}

// The end of a rollout lists what it changed, not the world
// (stage.ProducedFiles with Rollout.Stored): the watch's Changed leaves
// out every file still only the prefill's without asking about it, and
// asks Stored only of the files of the directories the rollout touched;
// a file rewritten with its stored content counts as the world's.
func TestChangedListsWhatTheRolloutChanged(t *testing.T) {
	w := storedWithFiles(t, 700) // 100 files in each of pkg0-6
	r, wm := stageOverlay(t, w)
	tree, err := wm.Watch().For(r.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range w.Files {
		if strings.HasPrefix(f.Path, "workspace/") {
			total++
		}
	}
	os.WriteFile(filepath.Join(r.Workspace, "pkg1", "f001.py"), []byte("changed\n"), 0o644)
	os.WriteFile(filepath.Join(r.Workspace, "pkg1", "f008.py"), []byte("x = 8\n"), 0o644) // as stored
	os.WriteFile(filepath.Join(r.Workspace, "pkg1", "new.py"), []byte("new\n"), 0o644)
	os.Remove(filepath.Join(r.Workspace, "pkg2", "f002.py"))
	asked := map[string]bool{}
	files, more, kept := tree.Changed(100, func(f watch.File) bool {
		asked[f.Rel] = true
		return r.Stored(f)
	})
	var got []string
	for _, f := range files {
		got = append(got, f.Rel)
	}
	slices.Sort(got)
	if strings.Join(got, " ") != "pkg1/f001.py pkg1/new.py" || more != 0 {
		t.Errorf("changed %v (+%d), want pkg1/f001.py and pkg1/new.py", got, more)
	}
	if want := total - 2; kept != want { // f001 changed, f002 removed
		t.Errorf("kept %d of the world's %d files, want %d", kept, total, want)
	}
	for rel := range asked {
		if !strings.HasPrefix(rel, "pkg1/") && !strings.HasPrefix(rel, "pkg2/") {
			t.Errorf("asked about %s, in a directory the rollout did not touch", rel)
		}
	}
	if len(asked) == 0 || len(asked) > 2*100+1 {
		t.Errorf("asked about %d files, want those of the two touched directories", len(asked))
	}
}

// The rollout's watch exists when Stage returns: a file written before
// anything else asks for the watch (write_file in a turn's first calls,
// before any bash) is seen, not taken for the stored one. A watch filled
// from the manifest later would believe the store for it.
func TestAWriteBeforeTheFirstCommandIsSeen(t *testing.T) {
	w := storedWithFiles(t, 70)
	r, wm := stageOverlay(t, w)
	os.WriteFile(filepath.Join(r.Workspace, "pkg4", "f004.py"), []byte("fixed\n"), 0o644)
	tree := wm.Watch().Lookup(r.Workspace)
	if tree == nil {
		t.Error("Stage made no watch of the workspace")
		tree, _ = wm.Watch().For(r.Workspace) // as the first bash would: filled from the manifest
	}
	files, _, _ := tree.Changed(10, r.Stored)
	if len(files) != 1 || files[0].Rel != "pkg4/f004.py" || files[0].Sum != watch.Sum(sha256.Sum256([]byte("fixed\n"))) {
		t.Errorf("changed %+v, want pkg4/f004.py with its new content", files)
	}
}
