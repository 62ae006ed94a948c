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
	files, more, _ = t.list(limit, nil)
	return files, more
}

// Changed is Files less the files a caller already knows: those same
// accepts, and every file still only its Prefill's (no event ever named
// it: it is as the Prefill says), which it neither lists nor asks same
// about. They are counted in kept; more counts the others past limit. Its
// cost grows with the files that have nodes (those in directories
// something touched), not with the Prefill's.
func (t *Tree) Changed(limit int, same func(File) bool) (files []File, more, kept int) {
	return t.list(limit, same)
}

// list is Files (same nil) and Changed.
func (t *Tree) list(limit int, same func(File) bool) (files []File, more, kept int) {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
	t.hashStale()
	total, lazyFiles := 0, 0
	if t.lazy != nil {
		lazyFiles = int(t.lazy.files)
	}
	for id := int32(1); id < t.nodes.n; id++ {
		if n := t.nodes.at(id); n.parent != free && n.e.Mode.IsRegular() {
			total++
		}
	}
	if same == nil {
		total += lazyFiles
	} else {
		kept = lazyFiles
	}
	var kids []int32
	var lazy []File // the files of the lazy directories being walked, a stack as kids is
	files = make([]File, 0, max(0, min(limit, total)))
	listed := 0 // files listed or, past limit, counted in more
	var walk func(id int32, rel string)
	walk = func(id int32, rel string) {
		start := len(kids)
		for k := t.nodes.at(id).kid; k != none; k = t.nodes.at(k).next {
			kids = append(kids, k)
		}
		mine := kids[start:]
		slices.SortFunc(mine, func(a, b int32) int { return strings.Compare(t.nodes.at(a).name, t.nodes.at(b).name) })
		// A lazy directory's files (no nodes yet) merge in by name;
		// Changed leaves them out.
		lazyStart := len(lazy)
		if same == nil {
			lazy = t.lazyKids(id, lazy)
		}
		pending := lazy[lazyStart:]
		for i := 0; i < len(mine) || len(pending) > 0; {
			if same == nil && len(files) >= limit {
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
				f := File{Rel: r, Size: n.e.Size, Sum: n.sum, Hashed: n.hashed}
				switch {
				case same != nil && f.Hashed && same(f):
					kept++
				case len(files) < limit:
					files = append(files, f)
					listed++
				default:
					listed++
				}
			case n.e.Mode&fs.ModeType == fs.ModeDir:
				walk(k, r)
			}
		}
		kids, lazy = kids[:start], lazy[:lazyStart]
	}
	if !t.forgotten {
		walk(0, "")
	}
	if same != nil {
		return files, listed - len(files), kept
	}
	return files, total - len(files), 0
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
