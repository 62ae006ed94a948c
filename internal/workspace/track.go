package workspace

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/watch"
)

// A Mark and Since give the deltas of one command at a cost that grows
// with what changed, not with the plane: each plane's tree (package watch)
// keeps its regular files' content hashes, current from kernel change
// notification, and a Mark is one watch.Sub per plane that keeps each
// file's content from before its first change. The deltas are those Diff
// and Changes would give for two snapshots taken at Mark and at Since.
//
// An FS keeps no index of its own: every FS and view over a plane shares
// that plane's one tree (in the FS's Set), and a Mark holds only what
// changed.

// Mark is the planes' state before a command.
type Mark struct {
	planes []string
	subs   []*watch.Sub // by plane; nil once Since ended the mark
}

// Mark brings the tree of each plane up to date and starts recording what
// changes in them.
func (w *FS) Mark(planes ...string) (*Mark, error) {
	m := &Mark{planes: planes}
	for _, p := range planes {
		root := w.Root(p)
		if root == "" {
			m.end()
			return nil, fmt.Errorf("workspace: unknown plane %q", p)
		}
		t, err := w.Trees().For(root)
		if err != nil {
			m.end()
			return nil, fmt.Errorf("workspace: watch /%s: %w", p, err)
		}
		m.subs = append(m.subs, t.Mark())
	}
	w.mu.Lock()
	w.marks = append(w.marks, m)
	w.mu.Unlock()
	return m, nil
}

// Since brings the trees up to date, ends the mark and returns the files
// created, modified (content) and deleted since it, sorted by path, seen
// from this FS as Changes sees them. Runtime temporary files are not
// files. Since again on an ended mark returns nothing.
func (w *FS) Since(m *Mark) ([]Delta, error) {
	var out []Delta
	for i, sub := range m.subs {
		p := m.planes[i]
		for _, c := range sub.TakeFiles() {
			if isTemp(path.Base(c.Rel)) {
				continue
			}
			d := Delta{Path: "/" + p + "/" + c.Rel}
			if c.Had {
				d.Before = c.Before.String()
			}
			if c.Has {
				d.After, d.Bytes, d.MTime = c.After.String(), c.Size, time.Unix(0, c.MTime)
			}
			out = append(out, d)
		}
	}
	m.end()
	w.mu.Lock()
	w.marks = slices.DeleteFunc(w.marks, func(x *Mark) bool { return x == m })
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b Delta) int { return strings.Compare(a.Path, b.Path) })
	return w.own(out), nil
}

func (m *Mark) end() {
	for _, s := range m.subs {
		s.Close()
	}
	m.subs = nil
}

// Release ends the marks this FS still has open (an agent that ended: its
// FS is no longer asked), so its trees no longer keep anything for it, and
// closes the Set the FS made for itself (a given Watch is its owner's).
func (w *FS) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.marks {
		m.end()
	}
	w.marks = nil
	w.ownSet.Close()
	w.ownSet = nil
}

// Trees is the Set the planes are watched in: Watch, else the FS's own.
// Views share it, and so do the sandbox's mounts of the planes.
func (w *FS) Trees() *watch.Set {
	if w.Watch != nil {
		return w.Watch
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ownSet == nil {
		w.ownSet = watch.NewSet()
	}
	return w.ownSet
}
