package worktree

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"sync"

	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
)

// sharedIndex keeps what scan would give for a shared directory current
// from kernel change notification (package watch): a Create looks again
// only at the entries that changed since the last one, not at every file.
//
// Its state is a base, written in place until a baseline holds it, and
// the changes since (delta) once one does: a Create hands out the base
// and a copy of the delta; when the delta has grown past a fraction of
// the base, the two are folded into a new base. A Create then costs what
// changed (amortized), and the worktrees of a run share one copy of the
// shared directory's hashes.
type sharedIndex struct {
	mu    sync.Mutex
	sub   *watch.Sub
	base  *base
	held  bool              // a baseline holds base: changes go to delta
	delta map[string]string // rel -> state ("" gone), while held
}

var indexes sync.Map // absolute dir -> *sharedIndex

// scanShared is the baseline of dir at a cost that grows with what changed
// in dir since the last call; without a watch it is scan with the stat
// cache.
func scanShared(dir string) (*baseline, error) {
	v, _ := indexes.LoadOrStore(dir, &sharedIndex{})
	ix := v.(*sharedIndex)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.sub == nil {
		t, err := watch.For(dir)
		if err != nil {
			m, err := scan(dir, cacheFor(dir))
			if err != nil {
				return nil, err
			}
			return baselineOf(m), nil
		}
		ix.sub, ix.base, ix.delta = t.Subscribe(), newBase(), map[string]string{}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	hs, err := workspace.NewHasher(dir)
	if err != nil {
		return nil, err
	}
	defer hs.Close()
	// The watch lists every entry whose stat changed or that was too
	// recent to trust (watch.RacySlack): each listed file is hashed again.
	for _, rel := range ix.sub.Take() {
		if rel == "." {
			continue
		}
		sum, _, _, err := hs.Sum(rel)
		switch {
		case err == nil:
			ix.put(rel, sum.String())
		case errors.Is(err, workspace.ErrNotRegular):
			fi, lerr := root.Lstat(rel)
			if lerr != nil || fi.Mode()&fs.ModeSymlink == 0 {
				ix.put(rel, "") // a directory or special file: not in a baseline
				continue
			}
			target, err := root.Readlink(rel)
			if err != nil {
				ix.put(rel, "")
				continue
			}
			ix.put(rel, linkPrefix+target)
		default:
			ix.put(rel, "") // gone or unreadable: treated as changed by someone else
		}
	}
	if len(ix.delta) > 1024+(len(ix.base.files)+len(ix.base.links))/8 {
		ix.fold()
	}
	ix.held = true
	return &baseline{base: ix.base, over: maps.Clone(ix.delta)}, nil
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
