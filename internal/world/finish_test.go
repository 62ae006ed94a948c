package world_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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

// A rollout that touches nothing: staging proves the world intact from its
// seal without reading a file, and finishing moves nothing out of the
// overlay; the terminal workspace still holds every file, linked to the
// store.
func TestUntouchedWorldIsNeitherHashedNorCopied(t *testing.T) {
	w := storedWithFiles(t, 200)
	hashed, moved := world.Hashed(), world.Moved()
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
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
	ws := filepath.Join(runDir, "workspace")
	for _, rel := range []string{"pkg3/f003.py", "pkg3/f199.py", "notes/n.txt"} {
		a, err1 := os.Stat(filepath.Join(ws, rel))
		b, err2 := os.Stat(filepath.Join(w.Workspace(), rel))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not kept as a link to the store: %v %v", rel, err1, err2)
		}
	}
}

// What a rollout changed is delivered, and only that is moved: a rewritten
// file, a new file in a new directory; a removed file and a removed
// directory's files are absent; the store is unchanged. So too when the
// rollout released the world's list before it finished (Release: only
// its workspace paths kept).
func TestFinishDeliversOnlyTheChanges(t *testing.T) {
	for _, release := range []bool{false, true} {
		t.Run(fmt.Sprintf("release=%v", release), func(t *testing.T) { finishDelivers(t, release) })
	}
}

func finishDelivers(t *testing.T, release bool) {
	w := storedWithFiles(t, 30)
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
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
	var unchanged []string // the workspace files the rollout left as stored
	for _, f := range w.Files {
		if rel, ok := strings.CutPrefix(f.Path, "workspace/"); ok && !strings.HasPrefix(rel, "pkg3/") && rel != "pkg1/f001.py" && rel != "pkg2/f002.py" {
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
	ws := filepath.Join(runDir, "workspace")
	for rel, want := range map[string]string{"pkg1/f001.py": "changed\n", "new/deep/n.py": "new\n", "pkg3/only.py": "only\n", "pkg4/f004.py": "x = 4\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", rel, b, err, want)
		}
	}
	for _, rel := range unchanged {
		a, err1 := os.Stat(filepath.Join(ws, rel))
		b, err2 := os.Stat(filepath.Join(w.Workspace(), rel))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not kept as a link to the store: %v %v", rel, err1, err2)
		}
	}
	if len(unchanged) < 25 {
		t.Fatalf("only %d unchanged files", len(unchanged))
	}
	for _, rel := range []string{"pkg2/f002.py", "pkg3/f003.py", "pkg3/f010.py"} {
		if _, err := os.Lstat(filepath.Join(ws, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was removed by the rollout but is in its terminal workspace (%v)", rel, err)
		}
	}
	if d := world.Moved() - moved; d != 3 {
		t.Errorf("finish moved %d files, want the 3 the rollout wrote", d)
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

// A rollout that left a file unchanged links it to the store (Finish), so
// the stored file has several links; the next rollout of the world still
// edits it with the file tools: through the overlay a write copies it up
// and never changes the store or the earlier run. A hard link made inside
// the workspace is still refused.
func TestNextRolloutWritesAFileAnEarlierOneLinked(t *testing.T) {
	w := storedWithFiles(t, 10)
	stage := func() (*world.Rollout, string) {
		runDir := filepath.Join(t.TempDir(), "run")
		os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
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
	r, _ := stage()
	defer r.Finish()
	if fi, err := os.Stat(filepath.Join(r.Workspace, "pkg1", "f001.py")); err != nil || fi.Sys().(*syscall.Stat_t).Nlink < 2 {
		t.Fatalf("the stored file is not linked by the first rollout (%v)", err)
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
	for _, f := range []string{filepath.Join(w.Workspace(), "pkg1", "f001.py"), filepath.Join(firstDir, "workspace", "pkg1", "f001.py")} {
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
