package workspace

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/watch"
)

// A Mark and Since give the deltas of one command at a cost that grows
// with what changed, not with the plane: each plane's regular files and
// hashes are kept in an index that only the entries the kernel reported
// changed (package watch) are looked at again for. The deltas are those
// Diff and Changes would give for two snapshots taken at Mark and at
// Since.
//
// The index keeps a compact record per file (the hash as a Sum, not as
// text; no stat of its own): the tree lists every entry whose stat
// changed or whose mtime was too recent to trust when an event named it
// (watch.RacySlack), and every file it lists is hashed again, so a record
// never needs its stat to tell whether its hash still holds.

// planeIndex is what this FS knows of a plane's regular files.
type planeIndex struct {
	sub   *watch.Sub
	files map[string]fileRec // rel -> hash, size, mtime
}

// fileRec is one indexed file.
type fileRec struct {
	sum   Sum
	size  int64
	mtime int64 // ns
}

// Mark is the planes' state before a command.
type Mark struct {
	planes []string
	// before holds, per plane and rel, the state at the mark of every
	// file that changed since (absent: ok false).
	before map[string]map[string]markEntry
}

type markEntry struct {
	e  fileRec
	ok bool
}

// Mark brings the index of each plane up to date and starts recording
// what changes in them.
func (w *FS) Mark(planes ...string) (*Mark, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := &Mark{planes: planes, before: map[string]map[string]markEntry{}}
	for _, p := range planes {
		if err := w.syncPlane(p); err != nil {
			return nil, err
		}
		m.before[p] = map[string]markEntry{}
	}
	w.marks = append(w.marks, m)
	return m, nil
}

// Since brings the indexes up to date, ends the mark and returns the files
// created, modified (content) and deleted since it, sorted by path, seen
// from this FS as Changes sees them.
func (w *FS) Since(m *Mark) ([]Delta, error) {
	w.mu.Lock()
	var err error
	for _, p := range m.planes {
		if e := w.syncPlane(p); e != nil && err == nil {
			err = e
		}
	}
	w.marks = slices.DeleteFunc(w.marks, func(x *Mark) bool { return x == m })
	var out []Delta
	for _, p := range m.planes {
		var ds []Delta
		ix := w.index[p]
		for rel, b := range m.before[p] {
			a, ok := ix.files[rel]
			pp := "/" + p + "/" + rel
			switch {
			case ok && !b.ok:
				ds = append(ds, Delta{Path: pp, After: a.sum.String(), Bytes: a.size, MTime: time.Unix(0, a.mtime)})
			case ok && a.sum != b.e.sum:
				ds = append(ds, Delta{Path: pp, Before: b.e.sum.String(), After: a.sum.String(), Bytes: a.size, MTime: time.Unix(0, a.mtime)})
			case !ok && b.ok:
				ds = append(ds, Delta{Path: pp, Before: b.e.sum.String()})
			}
		}
		out = append(out, ds...)
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b Delta) int { return strings.Compare(a.Path, b.Path) })
	return w.own(out), err
}

// syncPlane looks again at the files of plane the kernel reported changed.
// w.mu is held.
func (w *FS) syncPlane(plane string) error {
	root := w.Root(plane)
	if root == "" {
		return fmt.Errorf("workspace: unknown plane %q", plane)
	}
	ix := w.index[plane]
	if ix == nil {
		t, err := watch.For(root)
		if err != nil {
			return fmt.Errorf("workspace: watch /%s: %w", plane, err)
		}
		ix = &planeIndex{sub: t.Subscribe(), files: map[string]fileRec{}}
		if w.index == nil {
			w.index = map[string]*planeIndex{}
		}
		w.index[plane] = ix
	}
	hs, err := NewHasher(root)
	if err != nil {
		return fmt.Errorf("workspace: /%s: %w", plane, err)
	}
	defer hs.Close()
	for _, rel := range ix.sub.Take() {
		if rel == "." {
			continue
		}
		old, had := ix.files[rel]
		var rec fileRec
		err := errNotRegular
		if !isTemp(path.Base(rel)) {
			rec.sum, rec.size, rec.mtime, err = hs.Sum(rel)
		}
		if err != nil {
			if had {
				w.noteChange(plane, rel, old, true)
				delete(ix.files, rel)
			}
			continue
		}
		if !had || old.sum != rec.sum {
			w.noteChange(plane, rel, old, had)
		}
		ix.files[rel] = rec
	}
	return nil
}

// recIn is the record of rel if it is a regular file, through os.Root.
func recIn(r *os.Root, rel string) (fileRec, error) {
	fi, err := r.Lstat(rel)
	if err != nil {
		return fileRec{}, err
	}
	if !fi.Mode().IsRegular() {
		return fileRec{}, errNotRegular
	}
	sum, err := sumIn(r, rel)
	return fileRec{sum: sum, size: fi.Size(), mtime: fi.ModTime().UnixNano()}, err
}

// noteChange keeps rel's state before its first change in every open mark.
func (w *FS) noteChange(plane, rel string, old fileRec, had bool) {
	for _, m := range w.marks {
		b := m.before[plane]
		if b == nil {
			continue
		}
		if _, ok := b[rel]; !ok {
			b[rel] = markEntry{e: old, ok: had}
		}
	}
}

// Release ends this FS's subscriptions to its planes' trees and drops its
// index (an agent that ended: its FS is no longer asked). A later Mark
// indexes the planes anew.
func (w *FS) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ix := range w.index {
		ix.sub.Close()
	}
	w.index = nil
}
