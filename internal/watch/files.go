package watch

import (
	"io/fs"
	"slices"
	"strings"
)

// File is one regular file of a tree as of its last sync.
type File struct {
	Rel    string // slash path relative to the root
	Size   int64
	Sum    Sum
	Hashed bool // Sum holds (false: the file could not be read)
}

// Files syncs the tree, hashes the files whose content may have changed
// since they were last hashed (only those: the cost grows with the
// changes), and returns its first limit regular files in the order of a
// walk that lists each directory sorted by name (filepath.WalkDir's), and
// how many more regular files it holds. It lists no directory and stats
// no file: what the tree knows is current once a command has exited.
// A forgotten tree holds nothing.
func (t *Tree) Files(limit int) (files []File, more int) {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
	t.hashStale()
	total := 0
	if t.lazy != nil {
		total = int(t.lazy.files)
	}
	for id := int32(1); id < t.nodes.n; id++ {
		if n := t.nodes.at(id); n.parent != free && n.e.Mode.IsRegular() {
			total++
		}
	}
	var kids []int32
	var lazy []File // the files of the lazy directories being walked, a stack as kids is
	files = make([]File, 0, max(0, min(limit, total)))
	var walk func(id int32, rel string)
	walk = func(id int32, rel string) {
		start := len(kids)
		for k := t.nodes.at(id).kid; k != none; k = t.nodes.at(k).next {
			kids = append(kids, k)
		}
		mine := kids[start:]
		slices.SortFunc(mine, func(a, b int32) int { return strings.Compare(t.nodes.at(a).name, t.nodes.at(b).name) })
		// A lazy directory's files (no nodes yet) merge in by name.
		lazyStart := len(lazy)
		lazy = t.lazyKids(id, lazy)
		pending := lazy[lazyStart:]
		for i := 0; i < len(mine) || len(pending) > 0; {
			if len(files) >= limit {
				break
			}
			if len(pending) > 0 && (i == len(mine) || pending[0].Rel < t.nodes.at(mine[i]).name) {
				f := pending[0]
				f.Rel = join(rel, f.Rel)
				files, pending = append(files, f), pending[1:]
				continue
			}
			k := mine[i]
			i++
			n := t.nodes.at(k)
			r := join(rel, n.name)
			switch {
			case n.e.Mode.IsRegular():
				files = append(files, File{Rel: r, Size: n.e.Size, Sum: n.sum, Hashed: n.hashed})
			case n.e.Mode&fs.ModeType == fs.ModeDir:
				walk(k, r)
			}
		}
		kids, lazy = kids[:start], lazy[:lazyStart]
	}
	if !t.forgotten {
		walk(0, "")
	}
	return files, total - len(files)
}

// Matching syncs the tree and returns the paths of its regular files
// whose name match accepts, in no order: a search of what the tree holds,
// with no directory listed and no file statted.
func (t *Tree) Matching(match func(name string) bool) []string {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
	var out []string
	for id := int32(1); id < t.nodes.n; id++ {
		if n := t.nodes.at(id); n.parent != free && n.e.Mode.IsRegular() && match(n.name) {
			out = append(out, t.nodes.rel(id))
		}
	}
	t.eachLazy(func(dir int32, name string, _ Entry, _ Sum) {
		if match(name) {
			out = append(out, join(t.nodes.rel(dir), name))
		}
	})
	return out
}
