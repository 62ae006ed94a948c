// Package worktree gives a subagent a private copy-on-write view of the shared
// workspace (SPEC R-PLANE-2, --isolation per-agent) and merges what it changed
// back into the shared workspace without overwriting anyone else's work.
//
// Guarantees:
//   - nothing an agent does in Worktree.Dir reaches the shared directory
//     before Merge;
//   - at Create the shared directory's files and symlinks are recorded (path
//     → content hash or link target: the baseline); Merge writes a path only
//     if shared still holds its baseline version there or already holds the
//     agent's version. Otherwise it reports a Conflict, leaves shared as it
//     is, and keeps the agent's version under <root>/<name>/conflicts/;
//   - every write into shared, the worktree copy and conflicts/ goes through
//     hostfs (R-SBX-5): nothing is written outside those directories and no
//     link in them is followed, even one another agent planted since; a
//     file is written through a temporary file and renamed into place only
//     if its content has the hash Changes reported, so a reader never sees
//     it half-written and an agent still writing cannot slip in other bytes;
//   - a symlink whose target is absolute or climbs out of the workspace is
//     never applied: it is listed in MergeReport.Refused;
//   - merges into one shared directory are serialised (a mutex per path in
//     the Manager and flock(2) on the directory across Managers and
//     processes), so worktrees may merge concurrently;
//   - worktrees are made by a Manager, which a run's session owns: the
//     Set their directories are watched in, the shared directory's index
//     and stat cache are its, and nothing is kept process-wide;
//   - Close and Cleanup unmount before they remove anything, and never remove
//     a directory that is, or contains, a mount point; Close forgets the
//     view's watched trees first (in its Manager's Set), so a closed
//     worktree holds no inotify watch and no index;
//   - changes matching Worktree.Ignore (by default __pycache__, *.pyc,
//     .pytest_cache) are never merged; MergeReport.Ignored lists them.
//
// Two kinds: "overlay" mounts overlayfs (lowerdir = shared); "copy" is a full
// copy, used when the mount fails (not root, no overlayfs, an upper dir on a
// filesystem overlayfs refuses) or when asked with CreateCopy.
//
// Overlayfs leaves changes to a lower directory while it is mounted
// undefined. In practice files merged into shared by another worktree appear
// in this view, but a name the agent already looked up may keep showing the
// old version for a while. The view is a convenience; merge safety rests only
// on comparing shared itself with the baseline.
//
// Only content, links and deletions are merged: a mode change alone, empty
// directories created by the agent, and special files (FIFOs, sockets,
// devices) are not; a file's permission bits travel with its new content,
// and what a merge creates in shared (files, links, directories) takes the
// owner it has in the agent's view when the runtime may set it, so another
// agent's sandboxed commands can write in a directory a merge brought into
// its mounted view as they could had the directory been there before.
// Create takes the merge lock too, so a baseline never sees half a merge.
package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/watch"
)

// Kinds of worktree.
const (
	Overlay = "overlay"
	Copy    = "copy"
)

// ErrClosed is returned by Changes and Merge after Close.
var ErrClosed = errors.New("worktree: closed")

// Worktree is one agent's private view of the shared workspace. Its methods
// are not safe for concurrent use on one Worktree; distinct worktrees of one
// shared directory may be used concurrently.
type Worktree struct {
	Dir      string // the merged view: the agent's /workspace host directory
	Kind     string // Overlay or Copy
	Fallback string // why the overlay was not used ("" for Overlay or CreateCopy)
	IDMap    string // a view's lower layer: IDMapped, "none: why", or "" (not asked, or not root)
	// Ignore lists the changes Merge leaves out; Create sets DefaultIgnore.
	Ignore Ignore

	m      *Manager
	shared string // absolute shared directory
	base   string // <root>/<name>
	upper  string // overlay upper dir ("" for Copy)
	// baseline maps a slash-separated relative path to its state at Create:
	// a content hash, or linkPrefix+target for a symlink (see base.go).
	baseline *baseline
	closed   bool
}

const linkPrefix = "symlink:"

// Sub-directories of <root>/<name>.
const (
	upperDir     = "upper"
	workDir      = "work"
	mergedDir    = "merged"
	conflictsDir = "conflicts"
)

// Create makes a worktree of shared under root/name, an overlay if it can be
// mounted and a copy otherwise. root is private to the run and must lie
// outside shared; name must be a single path element not used before.
func (m *Manager) Create(shared, root, name string) (*Worktree, error) {
	w, err := m.prepare(shared, root, name)
	if err != nil {
		return nil, err
	}
	err = w.mountOverlay()
	if err == nil {
		return w, nil
	}
	w.Fallback = err.Error()
	if rerr := removeTree(w.base); rerr != nil {
		return nil, fmt.Errorf("worktree: clean up after a failed mount: %w", rerr)
	}
	return w.copyIn()
}

// CreateCopy is Create forced to the copy kind.
func (m *Manager) CreateCopy(shared, root, name string) (*Worktree, error) {
	w, err := m.prepare(shared, root, name)
	if err != nil {
		return nil, err
	}
	return w.copyIn()
}

func (m *Manager) prepare(shared, root, name string) (*Worktree, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("worktree: bad name %q: use a single path element", name)
	}
	shared, err := filepath.Abs(shared)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	if fi, err := os.Stat(shared); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("worktree: shared workspace %s is not a directory", shared)
	}
	if within(shared, root) || within(root, shared) {
		return nil, fmt.Errorf("worktree: root %s and shared %s must not contain each other", root, shared)
	}
	base := filepath.Join(root, name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	if err := os.Mkdir(base, 0o755); err != nil {
		return nil, fmt.Errorf("worktree: %s: %w", name, err)
	}
	return &Worktree{m: m, shared: shared, base: base, Dir: filepath.Join(base, mergedDir), Ignore: append(Ignore(nil), DefaultIgnore...)}, nil
}

// within reports whether p is dir or lies under it.
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// mountOverlay records the baseline and mounts under the merge lock, so the
// view and the baseline show the same shared state.
func (w *Worktree) mountOverlay() error {
	if strings.ContainsAny(w.shared+w.base, `,:\`) {
		return errors.New("overlay: a path holds one of , : \\")
	}
	unlock, err := w.m.lockShared(w.shared)
	if err != nil {
		return err
	}
	defer unlock()
	b, err := w.m.scanShared(w.shared)
	if err != nil {
		return err
	}
	w.baseline = b
	w.upper = filepath.Join(w.base, upperDir)
	work := filepath.Join(w.base, workDir)
	for _, d := range []string{w.upper, work, w.Dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := mount(w.shared, w.upper, work, w.Dir); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	w.Kind = Overlay
	return nil
}

func (w *Worktree) copyIn() (*Worktree, error) {
	if err := os.MkdirAll(w.base, 0o755); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	unlock, err := w.m.lockShared(w.shared)
	if err != nil {
		removeTree(w.base)
		return nil, err
	}
	b, err := copyTree(w.shared, w.Dir)
	unlock()
	if err != nil {
		removeTree(w.base)
		return nil, fmt.Errorf("worktree: copy %s: %w", w.shared, err)
	}
	w.baseline, w.upper, w.Kind = baselineOf(b), "", Copy
	return w, nil
}

// Close unmounts the view and removes it, keeping <root>/<name>/conflicts if
// a merge left anything there. Calling it again does nothing.
func (w *Worktree) Close() error {
	if w.closed {
		return nil
	}
	if err := closeDir(w.m.set, w.base); err != nil {
		return err
	}
	w.closed = true
	return nil
}

// Cleanup unmounts and removes what worktrees left under root after a crash
// (each <root>/<name> but its conflicts). A missing root is not an error.
func Cleanup(root string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("worktree: cleanup: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, closeDir(nil, filepath.Join(root, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// closeDir forgets the trees watched in set below base (nil: none), then
// unmounts base/merged (and anything mounted below base), and removes base
// but its conflicts directory.
func closeDir(set *watch.Set, base string) error {
	if set != nil {
		set.ForgetUnder(base)
	}
	mps, err := mountsUnder(base)
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	for _, mp := range mps {
		if err := unmount(mp); err != nil {
			return fmt.Errorf("worktree: unmount %s: %w", mp, err)
		}
	}
	for _, d := range []string{mergedDir, upperDir, workDir, lowerDir} {
		if err := removeTree(filepath.Join(base, d)); err != nil {
			return fmt.Errorf("worktree: %w", err)
		}
	}
	os.Remove(base) // fails, as it should, while conflicts/ is there
	return nil
}

// removeTree removes dir unless a mount point is at or under it: removing
// through a mount could reach the shared workspace.
func removeTree(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mps) > 0 {
		return fmt.Errorf("%s is still mounted", mps[0])
	}
	return os.RemoveAll(dir)
}
