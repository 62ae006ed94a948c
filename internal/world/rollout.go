package world

import (
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/hostfs"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
)

// Sandbox kinds of a rollout's /workspace (record.World.Sandbox).
const (
	SandboxOverlay = worktree.Overlay
	SandboxCopy    = worktree.Copy
	SandboxEmpty   = "empty" // the world has no initial workspace
)

// Rollout is the fresh mutable state of one run of a world: inputs linked
// from the store and a /workspace whose lower layer is the store.
type Rollout struct {
	World     *World
	Inputs    []record.FileEntry // what the agent sees at /inputs, hashed
	Workspace string             // the /workspace host directory while the run lasts
	Upper     string             // its overlay upper layer ("" unless an overlay; workspace.FS.Upper)
	Record    record.World       // what the record says about it
	runDir    string
	wt        *worktree.Worktree
	own       *worktree.Manager // Stage's own manager (none given), closed by Finish
	intact    chan error        // the check Stage began
	checked   struct {
		once sync.Once
		err  error
	}
}

// Intact waits for the check of the stored world Stage began and returns
// its answer (World.Intact, taken once per rollout): nil when the world
// is the one stored, else an error naming the file that is not.
func (r *Rollout) Intact() error {
	r.checked.once.Do(func() { r.checked.err = <-r.intact })
	return r.checked.err
}

// Stage prepares runDir/inputs (hard links to the store's inputs/ and,
// under inputs/corpus/, its corpus/) and the rollout's workspace: an
// overlay of the store's workspace/ under runDir/world/, or runDir/workspace
// when the world has none. Finish must be called when the run is over. The
// overlay is made by wm (the run's, watching in its Set); nil: one of the
// rollout's own. The overlay's watch (filled from the manifest and seal)
// is made before Stage returns, so that no write escapes it. The stored
// world must be intact (Intact): a world whose files changed since it was
// stored (a replaced test, a new input) is refused, naming the file. With a seal, Stage stats only the world's
// directories before staging (a file added, removed, renamed or replaced
// changes its directory, so such a world is refused here, named); the
// stat of every file, which a rewrite in place changes, runs on other
// goroutines while the first commands do: the caller asks the rollout's
// Intact before it verifies, delivers or calls the rollout trainable, and
// refuses the result of a world that fails it. A world without a seal, or
// whose directories changed, is checked in full first.
func Stage(w *World, runDir string, wm *worktree.Manager) (*Rollout, error) {
	if rec := w.seal(); rec == nil {
		if err := w.Intact(); err != nil {
			return nil, err
		}
	} else if ok, _ := w.dirsAsSealed(rec); !ok {
		if err := w.Intact(); err != nil {
			return nil, err
		}
	}
	r := &Rollout{World: w, runDir: runDir, Workspace: filepath.Join(runDir, "workspace"), intact: make(chan error, 1)}
	if wm == nil {
		wm = worktree.NewManager(nil)
		r.own = wm // closed by Finish, with the watch of the workspace
	}
	// One goroutine: the check is not waited for until the end, and the
	// first commands (the workspace watch's first walk) need the cores.
	go func() { r.intact <- w.intact(1) }()
	r.Record = record.World{ID: w.ID, Name: w.Name, Family: w.Family, Sandbox: SandboxEmpty,
		Generator: record.WorldGenerator{Name: w.Gen.Name, Version: w.Gen.Version, Seed: w.Gen.Seed, Level: w.Gen.Level}}
	var err error
	if r.Inputs, err = LinkInputs(w, filepath.Join(runDir, "inputs")); err != nil {
		return nil, err
	}
	if isDir(w.Workspace()) {
		wt, err := wm.CreateView(w.Workspace(), filepath.Join(runDir, "world"), "workspace")
		if err != nil {
			return nil, fmt.Errorf("world: the rollout's workspace: %w", err)
		}
		r.wt, r.Workspace, r.Upper = wt, wt.Dir, wt.Upper()
		if wt.Kind == worktree.Overlay {
			// No stat or read of the stored files to watch them: the
			// tree is filled from the manifest and seal (a v1 seal: the
			// watch walks the workspace but reads no stored file).
			if p, ok := w.prefill(); ok {
				wm.Watch().Prefill(wt.Dir, p)
			} else {
				wm.Watch().Seed(wt.Dir, w.known)
			}
			// The watch is made now, before anything can write to the
			// workspace: a prefilled tree believes the store for every
			// file no event names, so a write made before its directory
			// is watched (a write_file in the turn's first calls, before
			// the first bash) would be missed for good.
			if _, err := wm.Watch().For(wt.Dir); err != nil {
				return nil, errors.Join(fmt.Errorf("world: watch the rollout's workspace: %w", err), wt.Close())
			}
		}
		r.Record.Sandbox, r.Record.Fallback, r.Record.IDMap = wt.Kind, wt.Fallback, wt.IDMap
	}
	return r, nil
}

// Stored reports whether f, a file of the rollout's /workspace, is the
// world's stored file at its path: same path, size and content hash, by a
// binary search of the world's manifest (no read). False once the world
// is released. The run's file list leaves such files out
// (stage.ProducedFiles): the world's manifest lists them.
func (r *Rollout) Stored(f watch.File) bool {
	files := r.World.Files
	p := "workspace/" + f.Rel
	i, ok := slices.BinarySearchFunc(files, p, func(f File, p string) int { return strings.Compare(f.Path, p) })
	return ok && files[i].Bytes == f.Size && watch.Sum(files[i].SHA256) == f.Sum
}

// Release drops the world's file list and seal from memory
// (World.Release), once the rollout's Intact is answered: for a caller
// that is the world's only user and no longer watches the workspace or
// asks Stored. Finish needs neither.
func (r *Rollout) Release() {
	r.Intact()
	r.World.Release()
}

// Finish keeps the terminal workspace and removes the overlay; calling it
// again does nothing. It reads only the overlay's upper layer, which holds
// exactly what the rollout changed: a changed or created file is moved
// out of it into runDir/workspace (a rename, no copy), and the world's
// paths the rollout removed (a whiteout, a link or special file put in
// place of an entry, an emptied directory) are written to runDir's base
// (runfiles.Base): the run's files are its changes over the stored world,
// read through package runfiles. Nothing is done per file of the world.
// Only a world stored elsewhere than the run's home (runfiles.BaseDir) is
// filled in: every untouched file linked from the store.
func (r *Rollout) Finish() error {
	if r.own != nil {
		r.own.Close()
		r.own = nil
	}
	if r.wt == nil {
		return nil
	}
	wt := r.wt
	r.wt = nil
	dst := filepath.Join(r.runDir, "workspace")
	if wt.Kind != worktree.Overlay { // a copy: move it into place whole
		if err := os.Remove(dst); err != nil {
			return errors.Join(err, wt.Close())
		}
		if err := os.Rename(wt.Dir, dst); err != nil {
			return errors.Join(err, wt.Close())
		}
		return errors.Join(wt.Close(), os.RemoveAll(filepath.Join(r.runDir, "world")))
	}
	// Keep the upper layer past Close (which removes it): moved aside
	// while mounted is not allowed, so it is unmounted first by Detach.
	upper, err := wt.Detach()
	if err != nil {
		return errors.Join(err, wt.Close())
	}
	changes, err := upperChanges(upper)
	base := runfiles.Base{World: r.World.ID}
	for _, c := range changes {
		if err != nil {
			break
		}
		to := filepath.Join(dst, filepath.FromSlash(c.rel))
		switch c.kind {
		case changedDir:
			err = os.MkdirAll(to, 0o755)
		case opaqueDir:
			err = os.MkdirAll(to, 0o755)
			base.Opaque = append(base.Opaque, c.rel)
		case changedFile:
			if err = os.MkdirAll(filepath.Dir(to), 0o755); err == nil {
				err = os.Rename(filepath.Join(upper, filepath.FromSlash(c.rel)), to)
				moved.Add(1)
			}
		case removed:
			base.Removed = append(base.Removed, c.rel)
		}
	}
	if err == nil {
		if sameDir(r.World.Workspace(), runfiles.BaseDir(r.runDir, r.World.ID)) {
			err = runfiles.WriteBase(r.runDir, base)
		} else {
			_, err = runfiles.Fill(dst, r.World.Workspace(), &base, false)
		}
	}
	return errors.Join(err, wt.Close(), os.RemoveAll(filepath.Join(r.runDir, "world")))
}

// sameDir reports whether a and b name the same existing directory.
func sameDir(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// moved counts the files Finish moved out of an upper layer (tests assert
// that an untouched world moves none).
var moved atomic.Int64

type changeKind int

const (
	changedDir  changeKind = iota // a directory merged with lower's
	opaqueDir                     // a directory that hides lower's
	changedFile                   // a regular file, changed or new
	removed                       // a whiteout, or an entry not kept (a link)
)

type change struct {
	rel  string
	kind changeKind
}

// upperChanges lists an overlay upper layer's entries in walk order.
func upperChanges(upper string) ([]change, error) {
	var out []change
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		if rel == "." {
			return nil
		}
		c := change{rel: filepath.ToSlash(rel), kind: removed}
		switch {
		case d.IsDir() && worktree.IsOpaque(p):
			c.kind = opaqueDir
		case d.IsDir():
			c.kind = changedDir
		case d.Type().IsRegular():
			c.kind = changedFile
		}
		out = append(out, c)
		return nil
	})
	return out, err
}

// LinkInputs fills dst with hard links to w's inputs (and its corpus under
// dst/corpus), copying where a link cannot be made, and returns the files
// by plane path.
func LinkInputs(w *World, dst string) ([]record.FileEntry, error) {
	entries := []record.FileEntry{}
	made := map[string]bool{}
	for _, f := range w.Files {
		var rel string
		switch {
		case hasPrefix(f.Path, "inputs/"):
			rel = f.Path[len("inputs/"):]
		case hasPrefix(f.Path, "corpus/"):
			rel = f.Path
		default:
			continue
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		from := filepath.Join(w.Dir, filepath.FromSlash(f.Path))
		if d := filepath.Dir(to); !made[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("world: link inputs: %w", err)
			}
			made[d] = true
		}
		if err := os.Link(from, to); err != nil {
			if err := hostfs.CopyNew(from, to); err != nil {
				return nil, fmt.Errorf("world: link inputs: %w", err)
			}
		}
		entries = append(entries, record.FileEntry{Path: "/inputs/" + rel, SHA256: workspace.HashPrefix + f.SHA256.String(), Bytes: f.Bytes})
	}
	return entries, nil
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// copyTreeInto copies the regular files under src into dst, replacing what
// is there; a missing src copies nothing. Written files are owner-writable
// whatever the store's modes.
func copyTreeInto(src, dst string) error {
	if !isDir(src) {
		return nil
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		os.Remove(to)
		return hostfs.CopyNew(p, to)
	})
}
