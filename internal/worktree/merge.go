package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/workspace"
)

// MergeReport is what a Merge did. Applied changes are now in shared (some
// were already there); Conflicts and Refused were left out of it.
type MergeReport struct {
	Applied   []Change   `json:"applied,omitempty"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Refused   []Refusal  `json:"refused,omitempty"`
	// Ignored are changed paths left out by Worktree.Ignore.
	Ignored []string `json:"ignored,omitempty"`
}

// Conflict is a change not applied because shared changed the same path since
// Create (or because applying it failed: see Reason). Hashes are content
// hashes, "symlink:<target>" for a link, "dir" for a directory and "" for
// nothing.
type Conflict struct {
	Path       string `json:"path"`
	Reason     string `json:"reason"`
	TheirsHash string `json:"theirs_hash,omitempty"` // shared now
	OursHash   string `json:"ours_hash,omitempty"`   // the agent's version
	Copy       string `json:"copy,omitempty"`        // host path of the agent's version kept for the lead
}

// Refusal is a change never applied, whatever shared holds.
type Refusal struct {
	Path   string `json:"path"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}

// Merge applies the agent's changes to shared, deletions first. A path is
// written only if shared holds its baseline version there; when shared holds
// something else, the path is a Conflict (unless shared already holds the
// agent's version). Merges into the same shared directory run one at a time
// (see lockShared). Applied changes become the new baseline, so merging
// again applies only what changed since.
func (w *Worktree) Merge() (MergeReport, error) {
	var rep MergeReport
	if w.closed {
		return rep, ErrClosed
	}
	changes, err := w.Changes()
	if err != nil {
		return rep, fmt.Errorf("worktree: changes: %w", err)
	}
	changes, rep.Ignored = w.Ignore.filter(changes)
	unlock, err := w.m.lockShared(w.shared)
	if err != nil {
		return rep, err
	}
	defer unlock()
	root, err := hostfs.Open(w.shared)
	if err != nil {
		return rep, fmt.Errorf("worktree: %w", err)
	}
	defer root.Close()

	// Deletions first, deepest first, then emptied directories pruned, so a
	// directory replaced by a file is gone before the file arrives.
	sort.SliceStable(changes, func(i, j int) bool {
		di, dj := changes[i].Kind == Deleted, changes[j].Kind == Deleted
		if di != dj {
			return di
		}
		return di && changes[i].Path > changes[j].Path
	})
	var gone []string
	pruned := false
	for _, c := range changes {
		if c.Kind != Deleted && !pruned {
			w.prune(root, gone)
			pruned = true
		}
		if w.mergeOne(root, c, &rep) && c.Kind == Deleted {
			gone = append(gone, c.Path)
		}
	}
	if !pruned {
		w.prune(root, gone)
	}
	return rep, nil
}

// mergeOne applies c or reports why not, and tells whether it applied.
func (w *Worktree) mergeOne(root *hostfs.Dir, c Change, rep *MergeReport) bool {
	if c.Kind == Symlink {
		if why := escapes(c.Path, c.Target); why != "" {
			rep.Refused = append(rep.Refused, Refusal{Path: c.Path, Target: c.Target, Reason: why})
			return false
		}
	}
	theirs, ours := stateIn(root.Root(), c.Path), c.state()
	if theirs != ours {
		if theirs != w.baseline.state(c.Path) {
			rep.Conflicts = append(rep.Conflicts, w.conflict(c, theirs,
				"shared changed this path since the worktree was created: compare it with the agent's copy and merge by hand"))
			return false
		}
		if err := w.apply(root, c); err != nil {
			rep.Conflicts = append(rep.Conflicts, w.conflict(c, theirs, "cannot apply: "+err.Error()))
			return false
		}
	}
	rep.Applied = append(rep.Applied, c)
	w.baseline.set(c.Path, ours) // "" for a deletion
	return true
}

// lockShared serialises merges into shared, and Creates with them: a mutex
// per directory in this process, flock(2) on the directory across processes.
func (m *Manager) lockShared(shared string) (func(), error) {
	mu := m.lockFor(shared)
	mu.Lock()
	unlock, err := lockDir(shared)
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("worktree: lock %s: %w", shared, err)
	}
	return func() { unlock(); mu.Unlock() }, nil
}

// escapes says why a link target leaves the workspace ("" if it does not).
func escapes(rel, target string) string {
	switch {
	case target == "":
		return "empty symlink target"
	case path.IsAbs(target):
		return "symlink target is absolute: point inside the workspace with a relative target"
	}
	if j := path.Join(path.Dir(rel), target); j == ".." || strings.HasPrefix(j, "../") {
		return "symlink target climbs out of the workspace"
	}
	return ""
}

// stateIn is what shared holds at rel, in the form of a baseline entry.
func stateIn(root *os.Root, rel string) string {
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return ""
	case err != nil:
		return "error: " + err.Error()
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := root.Readlink(rel)
		if err != nil {
			return "error: " + err.Error()
		}
		return linkPrefix + t
	case fi.IsDir():
		return "dir"
	case !fi.Mode().IsRegular():
		return "special: " + fi.Mode().String()
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return "error: " + err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "error: no longer a regular file"
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "error: " + err.Error()
	}
	return workspace.HashPrefix + hex.EncodeToString(h.Sum(nil))
}

// srcRoot is where the agent's versions are read from.
func (w *Worktree) srcRoot() string {
	if w.Kind == Overlay {
		return w.upper
	}
	return w.Dir
}

// openOurs opens the agent's version of a regular file, confined to srcRoot.
func (w *Worktree) openOurs(rel string) (*os.File, fs.FileMode, error) {
	f, err := os.OpenInRoot(w.srcRoot(), rel)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("no longer a regular file")
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Mode().Perm(), nil
}

// apply makes shared hold c's result at c.Path, through hostfs: no link in
// shared is followed, and a file is renamed into place only if the bytes
// copied have the hash Changes reported.
func (w *Worktree) apply(root *hostfs.Dir, c Change) error {
	if c.Kind == Deleted {
		return root.Remove(c.Path)
	}
	if dir := path.Dir(c.Path); dir != "." {
		if err := w.mkdirsLike(root, dir); err != nil {
			return err
		}
	}
	if c.Kind == Symlink {
		if err := root.Symlink(c.Target, c.Path); err != nil {
			return err
		}
		w.ownLike(root, c.Path)
		return nil
	}
	src, perm, err := w.openOurs(c.Path)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, _, err := root.Replace(c.Path, src, perm, c.Hash); errors.Is(err, hostfs.ErrChanged) {
		return errors.New("the agent's file changed during the merge")
	} else if err != nil {
		return err
	}
	w.ownLike(root, c.Path)
	return nil
}

// mkdirsLike creates the missing directories of dir in shared, each owned
// as it is in the agent's view. A directory the runtime created (as root)
// would otherwise be closed to the sandboxed commands of every other
// agent whose view shows it: a running worktree sees shared's new entries
// through its lower layer, where nothing hands them to the sandbox uid.
func (w *Worktree) mkdirsLike(root *hostfs.Dir, dir string) error {
	els := strings.Split(dir, "/")
	first := -1
	for i := range els {
		if _, err := root.Lstat(strings.Join(els[:i+1], "/")); errors.Is(err, fs.ErrNotExist) {
			first = i
			break
		}
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := first; i >= 0 && i < len(els); i++ {
		w.ownLike(root, strings.Join(els[:i+1], "/"))
	}
	return nil
}

// ownLike gives rel in shared the owner it has in the agent's view, when
// the runtime may (it is root); a link is not followed, and a failure
// leaves the owner the runtime's.
func (w *Worktree) ownLike(root *hostfs.Dir, rel string) {
	view, err := os.OpenRoot(w.Dir)
	if err != nil {
		return
	}
	defer view.Close()
	fi, err := view.Lstat(rel)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	root.Root().Lchown(rel, int(st.Uid), int(st.Gid))
}

// conflict builds the report of c and keeps the agent's version (a file or a
// link; nothing for a deletion) under <root>/<name>/conflicts/.
func (w *Worktree) conflict(c Change, theirs, reason string) Conflict {
	out := Conflict{Path: c.Path, Reason: reason, TheirsHash: theirs, OursHash: c.state()}
	if c.Kind == Deleted {
		return out
	}
	dst := filepath.Join(w.base, conflictsDir, filepath.FromSlash(c.Path))
	if err := w.keep(c); err != nil {
		out.Reason += fmt.Sprintf(" (the agent's version could not be kept: %v)", err)
		return out
	}
	out.Copy = dst
	return out
}

// keep copies the agent's version of c under <root>/<name>/conflicts/,
// through hostfs: an earlier conflict's link there is never followed.
func (w *Worktree) keep(c Change) error {
	dir := filepath.Join(w.base, conflictsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d, err := hostfs.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if p := path.Dir(c.Path); p != "." {
		if err := d.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	if err := d.RemoveAll(c.Path); err != nil {
		return err
	}
	if c.Kind == Symlink {
		return d.Symlink(c.Target, c.Path)
	}
	src, perm, err := w.openOurs(c.Path)
	if err != nil {
		return err
	}
	defer src.Close()
	_, _, err = d.Replace(c.Path, src, perm, "")
	return err
}

// prune removes the directories of deleted paths that became empty and are
// not directories in the agent's view any more.
func (w *Worktree) prune(root *hostfs.Dir, gone []string) {
	for _, p := range gone {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if fi, err := os.Lstat(filepath.Join(w.Dir, filepath.FromSlash(dir))); err == nil && fi.IsDir() {
				break
			}
			if fi, err := root.Lstat(dir); err != nil || !fi.IsDir() || root.Remove(dir) != nil {
				break // a link is never removed for its directory
			}
		}
	}
}
