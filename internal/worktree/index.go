package worktree

import (
	"io/fs"
	"maps"
	"os"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/watch"
)

// sharedIndex keeps what scan would give for a shared directory current
// from kernel change notification (package watch, whose tree keeps the
// files' hashes): a Create looks only at the entries that changed since
// the last one, and hashes nothing itself.
//
// Its state is a base, written in place until a baseline holds it, and
// the changes since (delta) once one does: a Create hands out the base
// and a copy of the delta; when the delta has grown past a fraction of
// the base, the two are folded into a new base. A Create then costs what
// changed (amortized), and the worktrees of a run share one copy of the
// shared directory's hashes.
type sharedIndex struct {
	mu    sync.Mutex
	tree  *watch.Tree
	files *watch.Sub // content changes (hashes kept by the tree)
	links *watch.Sub // every change, for the links among them
	base  *base
	held  bool              // a baseline holds base: changes go to delta
	delta map[string]string // rel -> state ("" gone), while held
}

// scanShared is the baseline of dir at a cost that grows with what changed
// in dir since the last call; without a watch it is scan with the stat
// cache.
func (m *Manager) scanShared(dir string) (*baseline, error) {
	ix := m.indexFor(dir)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	t, err := m.set.For(dir)
	if err != nil {
		files, err := scan(dir, m.cacheFor(dir))
		if err != nil {
			return nil, err
		}
		return baselineOf(files), nil
	}
	fill := t != ix.tree // the first time, or the tree was forgotten since
	if fill {
		// Links changed from now on come from ix.links; those there now
		// from the tree (not a first Take listing every entry).
		ix.tree, ix.files, ix.links, ix.base, ix.held, ix.delta = t, t.Subscribe(), t.Mark(), newBase(), false, map[string]string{}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Files first: a path that became a file from a link is then no
	// longer a link below. A file that cannot be read is none: treated as
	// changed by someone else.
	for _, c := range ix.files.TakeFiles() {
		switch {
		case !c.Has:
			ix.put(c.Rel, "")
		case !ix.held:
			ix.base.putFile(c.Rel, c.After)
		default:
			ix.put(c.Rel, c.After.String())
		}
	}
	changed := ix.links.Take()
	if fill {
		changed = append(changed, t.Links()...)
	}
	for _, rel := range changed {
		if rel == "." {
			continue
		}
		if m, ok := t.Mode(rel); ok && m&fs.ModeSymlink != 0 {
			if target, err := root.Readlink(rel); err == nil {
				ix.put(rel, linkPrefix+target)
				continue
			}
		}
		if s, _ := ix.get(rel); strings.HasPrefix(s, linkPrefix) {
			ix.put(rel, "")
		}
	}
	if len(ix.delta) > 1024+(len(ix.base.files)+len(ix.base.links))/8 {
		ix.fold()
	}
	ix.held = true
	return &baseline{base: ix.base, over: maps.Clone(ix.delta)}, nil
}

// get is rel's current state.
func (ix *sharedIndex) get(rel string) (string, bool) {
	if s, ok := ix.delta[rel]; ok {
		return s, s != ""
	}
	return ix.base.get(rel)
}

// put records rel's state ("" for none).
func (ix *sharedIndex) put(rel, state string) {
	if !ix.held {
		ix.base.put(rel, state)
		return
	}
	if old, had := ix.base.get(rel); had == (state != "") && old == state {
		delete(ix.delta, rel)
		return
	}
	ix.delta[rel] = state
}

// fold makes a new base of the base and the delta.
func (ix *sharedIndex) fold() {
	b := ix.base.clone()
	for rel, s := range ix.delta {
		b.put(rel, s)
	}
	ix.base, ix.held, ix.delta = b, false, map[string]string{}
}
