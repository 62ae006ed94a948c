package watch

import (
	"path"
	"path/filepath"
	"strings"
)

// Prefill is a directory's tree as a caller knows it without looking at
// its files (a world's stored manifest and seal, under a fresh overlay):
// what the first For of the directory takes instead of statting and
// reading every file.
type Prefill struct {
	// Dirs lists every directory below the root by slash path, each
	// after its parent (path order does).
	Dirs []string
	// Files calls yield with every regular file below the root: its
	// slash path (after its directory's in Dirs), its stat and its
	// content hash.
	Files func(yield func(rel string, e Entry, sum Sum) bool)
	// DirOwner: a file's UID and GID are those its directory has when
	// For stats it (the caller knows every entry has one owner).
	DirOwner bool
}

// Prefill makes the first For of dir (the next, once) build its tree from
// p: it stats and watches each directory p lists (a hundredth of the
// entries of a typical repository) and takes each file's stat and hash
// from p, statting and reading none. Where p does not fit what For finds
// (a directory missing or not a directory, a file whose directory p does
// not list) the tree is walked as without it. The caller vouches for the
// files: a file that differs from what p says is seen only once it
// changes again (a world's rollout proves its store unchanged, seal by
// seal, before its result counts).
func (s *Set) Prefill(dir string, p Prefill) {
	mu.Lock()
	defer mu.Unlock()
	if s.pre == nil {
		s.pre = map[string]*Prefill{}
	}
	s.pre[filepath.Clean(dir)] = &p
}

// fill builds the tree from p (its root watched already): false, with the
// tree holding only its root again, when p does not fit.
func (t *Tree) fill(p *Prefill) bool {
	if t.fillFrom(p) {
		return true
	}
	t.clear()
	t.watchDir(0, "")
	return false
}

func (t *Tree) fillFrom(p *Prefill) bool {
	for _, rel := range p.Dirs {
		dir, name := splitRel(rel)
		parent := t.nodes.find(dir)
		if parent == none || name == "" || t.nodes.child(parent, name) != none {
			return false
		}
		fi, err := t.r.Lstat(rel)
		if err != nil || !fi.IsDir() {
			return false
		}
		e := entryOf(fi)
		id := t.nodes.add(parent, name, e)
		t.account(e, 1)
		t.watchDir(id, rel)
	}
	ok := true
	lastDir, last := "\x00", none
	p.Files(func(rel string, e Entry, sum Sum) bool {
		dir, name := splitRel(rel)
		if dir != lastDir {
			lastDir, last = dir, t.nodes.find(dir)
		}
		if last == none || name == "" || !e.Mode.IsRegular() || !t.nodes.at(last).e.Mode.IsDir() && last != 0 ||
			t.nodes.child(last, name) != none {
			ok = false
			return false
		}
		if p.DirOwner {
			if last == 0 {
				fi, err := t.r.Lstat(".")
				if err != nil {
					ok = false
					return false
				}
				root := entryOf(fi)
				e.UID, e.GID = root.UID, root.GID
			} else {
				d := t.nodes.at(last).e
				e.UID, e.GID = d.UID, d.GID
			}
		}
		id := t.nodes.add(last, name, e)
		n := t.nodes.at(id)
		n.sum, n.hashed = sum, true
		t.account(e, 1)
		return true
	})
	return ok
}

// splitRel is rel's directory ("" the root) and last element.
func splitRel(rel string) (dir, name string) {
	dir, name = path.Split(rel)
	return strings.TrimSuffix(dir, "/"), name
}
