package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Delta is one file changed, by plane path. An empty hash means the file did
// not exist. Bytes is the size after (0 for a deleted file).
type Delta struct {
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Bytes  int64  `json:"bytes"`
	// MTime is the file's modification time after the change (zero for a
	// deletion); it lets concurrent observers tell who changed it.
	MTime time.Time `json:"-"`
}

// Snapshot is the regular files of one plane at one moment, each with its
// stat and content hash. Symbolic links, directories and special files are
// not part of it.
type Snapshot struct {
	plane string
	files map[string]fileState // plane path -> state
}

type fileState struct {
	st   stat
	hash string
}

// stat is what tells, without reading, that a file may have changed.
type stat struct {
	size  int64
	mtime int64 // ns
	mode  fs.FileMode
	ino   uint64
}

// hashEntry is a cached hash and when it was computed.
type hashEntry struct {
	st   stat
	hash string
	at   time.Time
}

// racySlack covers coarse file timestamps: a hash taken less than this after
// the file's mtime is not trusted next time, because a rewrite of the same
// size within the same clock tick would leave the stat unchanged (the "racy
// git" problem).
const racySlack = 50 * time.Millisecond

// Snapshot walks a plane and returns its files. Contents are hashed only for
// files whose stat differs from the last snapshot of that plane (or that were
// written too recently to trust the stat), so a step on an unchanged
// workspace costs one lstat per file.
func (w *FS) Snapshot(plane string) (Snapshot, error) {
	root := w.Root(plane)
	if root == "" {
		return Snapshot{}, fmt.Errorf("workspace: unknown plane %q", plane)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return Snapshot{}, fmt.Errorf("workspace: snapshot /%s: %w", plane, err)
	}
	defer r.Close()

	w.mu.Lock()
	old := w.hashes[plane]
	w.mu.Unlock()
	seen := make(map[string]hashEntry, len(old))
	snap := Snapshot{plane: plane, files: make(map[string]fileState, len(old))}
	walkErr := filepath.WalkDir(root, func(host string, d fs.DirEntry, err error) error {
		if err != nil {
			if host == root {
				return err
			}
			return nil // vanished or unreadable: not part of the snapshot
		}
		if !d.Type().IsRegular() || isTemp(d.Name()) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(root, host)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		st := stat{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode(), ino: inode(fi)}
		e, ok := old[rel]
		if !ok || e.st != st || e.st.mtime >= e.at.Add(-racySlack).UnixNano() {
			h, err := hashIn(r, rel)
			if err != nil {
				return nil
			}
			e = hashEntry{st: st, hash: h, at: time.Now()}
		}
		seen[rel] = e
		snap.files["/"+plane+"/"+rel] = fileState{st: st, hash: e.hash}
		return nil
	})
	if walkErr != nil {
		return Snapshot{}, fmt.Errorf("workspace: snapshot /%s: %w", plane, walkErr)
	}
	w.mu.Lock()
	if w.hashes == nil {
		w.hashes = make(map[string]map[string]hashEntry)
	}
	w.hashes[plane] = seen
	w.mu.Unlock()
	return snap, nil
}

// hashIn hashes a file through the plane's os.Root.
func hashIn(r *os.Root, rel string) (string, error) {
	sum, err := sumIn(r, rel)
	if err != nil {
		return "", err
	}
	return sum.String(), nil
}

// sumIn is hashIn as a Sum.
func sumIn(r *os.Root, rel string) (Sum, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return Sum{}, err
	}
	defer f.Close()
	sum, _, err := sumOpen(f)
	return sum, err
}

// Plane is the plane the snapshot was taken of.
func (s Snapshot) Plane() string { return s.plane }

// Len is the number of files.
func (s Snapshot) Len() int { return len(s.files) }

// Hash returns the hash and size of a file by plane path.
func (s Snapshot) Hash(planePath string) (hash string, size int64, ok bool) {
	f, ok := s.files[planePath]
	return f.hash, f.st.size, ok
}

// Diff lists the files created, modified (content changed) and deleted
// between two snapshots, sorted by path. A change of mode or mtime alone is
// not a delta.
func Diff(before, after Snapshot) []Delta {
	var out []Delta
	for p, a := range after.files {
		b, ok := before.files[p]
		switch {
		case !ok:
			out = append(out, Delta{Path: p, After: a.hash, Bytes: a.st.size, MTime: time.Unix(0, a.st.mtime)})
		case b.hash != a.hash:
			out = append(out, Delta{Path: p, Before: b.hash, After: a.hash, Bytes: a.st.size, MTime: time.Unix(0, a.st.mtime)})
		}
	}
	for p, b := range before.files {
		if _, ok := after.files[p]; !ok {
			out = append(out, Delta{Path: p, Before: b.hash})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Changes is Diff seen from this FS: in a private worktree view of a shared
// workspace (Shared set), a file that merely shows the shared directory's
// current content was changed by someone else (another agent's merge
// showing through the copy-on-write view), not by this agent, and is left
// out; so is a deletion of a file the shared directory no longer has.
func (w *FS) Changes(before, after Snapshot) []Delta {
	ds := Diff(before, after)
	if after.plane != Workspace {
		return ds
	}
	return w.own(ds)
}

// own leaves out of ds the /workspace deltas another agent made (see
// Changes).
func (w *FS) own(ds []Delta) []Delta {
	if w.Shared == "" {
		return ds
	}
	shared, err := os.OpenRoot(w.Shared)
	if err != nil {
		return ds
	}
	defer shared.Close()
	kept := ds[:0]
	for _, d := range ds {
		rel, ok := strings.CutPrefix(d.Path, "/workspace/")
		if !ok {
			kept = append(kept, d)
			continue
		}
		sum, _, err := HashIn(shared, rel)
		switch {
		case d.After != "" && err == nil && sum == d.After:
		case d.After == "" && err != nil:
		default:
			kept = append(kept, d)
		}
	}
	return kept
}
