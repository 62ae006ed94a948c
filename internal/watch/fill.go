package watch

import (
	"path"
	"path/filepath"
	"slices"
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
	// Files calls yield with the regular files directly in the
	// directory Dirs[dir] (dir -1: the root), in name order: name, stat
	// and content hash. It may be called for a directory more than once,
	// and at any time until the tree is forgotten: what it gives must
	// not change.
	Files func(dir int, yield func(name string, e Entry, sum Sum) bool)
	// OneOwner: every file's UID and GID are those the first file has
	// when For stats it (the caller knows every file has one owner, as
	// For sees them: a world's store through its overlay).
	OneOwner bool
}

// Prefill makes the first For of dir (the next, once) build its tree from
// p: it stats and watches each directory p lists (a hundredth of the
// entries of a typical repository) and neither stats nor reads a file. A
// directory's files stay p's, with no node of their own, until something
// names one of them (a kernel event, a lookup) or asks for every entry
// (a first Take): the tree then makes that directory's nodes from p. So a
// tree of 100,000 untouched files holds about as much as one of its
// directories, and starts in the time of a stat and a watch per
// directory plus a pass over p's files for the totals. Where p does not
// fit what For finds (a directory missing or not a directory, a file that
// is not regular) the tree is walked as without it. The caller vouches
// for the files: a file that differs from what p says is seen only once
// it changes again (a world's rollout proves its store unchanged, seal by
// seal, before its result counts).
func (s *Set) Prefill(dir string, p Prefill) {
	mu.Lock()
	defer mu.Unlock()
	if s.pre == nil {
		s.pre = map[string]*Prefill{}
	}
	s.pre[filepath.Clean(dir)] = &p
}

// lazy is what a prefilled tree still holds only in its Prefill.
type lazy struct {
	p        *Prefill
	dirs     map[int32]int // node -> index in p.Dirs (-1: the root) of a directory whose files have no nodes yet
	files    int64         // regular files without a node
	uid, gid uint32        // every file's owner (OneOwner)
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
	l := &lazy{p: p, dirs: make(map[int32]int, len(p.Dirs)+1)}
	l.dirs[0] = -1
	for i, rel := range p.Dirs {
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
		l.dirs[id] = i
	}
	// The totals count every file now; a file's node, when made, is
	// counted already.
	ok, owned := true, !p.OneOwner
	for i := -1; i < len(p.Dirs) && ok; i++ {
		p.Files(i, func(name string, e Entry, _ Sum) bool {
			ok = e.Mode.IsRegular() && name != "" && !strings.Contains(name, "/")
			if ok && !owned { // the one stat of a file
				dir := ""
				if i >= 0 {
					dir = p.Dirs[i]
				}
				fi, err := t.r.Lstat(join(dir, name))
				if ok = err == nil && fi.Mode().IsRegular(); ok {
					first := entryOf(fi)
					l.uid, l.gid, owned = first.UID, first.GID, true
				}
			}
			t.account(e, 1)
			l.files++
			return ok
		})
	}
	if !ok {
		return false
	}
	for id := range l.dirs {
		t.nodes.at(id).lazy = true
	}
	t.lazy = l
	return true
}

// expand makes the nodes of the files p holds for the directory id. mu is
// held.
func (t *Tree) expand(id int32) {
	l := t.lazy
	n := t.nodes.at(id)
	if l == nil || !n.lazy {
		return
	}
	n.lazy = false
	i := l.dirs[id]
	delete(l.dirs, id)
	l.p.Files(i, func(name string, e Entry, sum Sum) bool {
		if l.p.OneOwner {
			e.UID, e.GID = l.uid, l.gid
		}
		k := t.nodes.add(id, name, e)
		f := t.nodes.at(k)
		f.sum, f.hashed = sum, true
		l.files--
		return true
	})
	if len(l.dirs) == 0 {
		t.lazy = nil
	}
}

// expandAll makes a node of every file still only in the Prefill. mu is
// held.
func (t *Tree) expandAll() {
	for t.lazy != nil {
		for id := range t.lazy.dirs {
			t.expand(id)
			break
		}
	}
}

// eachLazy calls f with every file still only in the Prefill: its
// directory's node, name, stat and hash. mu is held.
func (t *Tree) eachLazy(f func(dir int32, name string, e Entry, sum Sum)) {
	l := t.lazy
	if l == nil {
		return
	}
	for id, i := range l.dirs {
		l.p.Files(i, func(name string, e Entry, sum Sum) bool {
			if l.p.OneOwner {
				e.UID, e.GID = l.uid, l.gid
			}
			f(id, name, e, sum)
			return true
		})
	}
}

// lazyKids appends to out the files of the directory id still only in
// the Prefill, in name order (none once it has their nodes). mu is held.
func (t *Tree) lazyKids(id int32, out []File) []File {
	if t.lazy == nil || !t.nodes.at(id).lazy {
		return out
	}
	start := len(out)
	t.lazy.p.Files(t.lazy.dirs[id], func(name string, e Entry, sum Sum) bool {
		out = append(out, File{Rel: name, Size: e.Size, Sum: sum, Hashed: true})
		return true
	})
	slices.SortFunc(out[start:], func(a, b File) int { return strings.Compare(a.Rel, b.Rel) })
	return out
}

// splitRel is rel's directory ("" the root) and last element.
func splitRel(rel string) (dir, name string) {
	dir, name = path.Split(rel)
	return strings.TrimSuffix(dir, "/"), name
}
