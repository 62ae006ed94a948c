package watch

import (
	"encoding/hex"
	"math/bits"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/hostfs"
)

// Sum is the content hash of a regular file: the SHA-256 of its bytes.
type Sum [32]byte

// String is the hash as records carry it ("sha256:<hex>").
func (s Sum) String() string {
	var b [len(hostfs.HashPrefix) + 2*len(s)]byte // one allocation, the string's
	copy(b[:], hostfs.HashPrefix)
	hex.Encode(b[len(hostfs.HashPrefix):], s[:])
	return string(b[:])
}

// Sub is one consumer's view of a tree's changes: a bit per node that
// changed (a few KiB however many entries change), the paths removed, and
// the content each file whose content changed had first.
type Sub struct {
	t        *Tree
	all      bool            // the next Take lists every entry
	ids      []uint64        // bit per node: changed since the last Take
	nids     int             // bits set in ids
	priors   map[int32]prior // each node whose content changed: its first
	gone     []goneEntry     // removed since the last Take
	goneKept int             // len(gone) after its last compaction
}

// prior is what an entry was before a change: a hashed regular file or
// not.
type prior struct {
	sum  Sum
	file bool
}

type goneEntry struct {
	rel   string
	prior prior
}

// Subscribe returns a new consumer whose first Take lists every entry.
func (t *Tree) Subscribe() *Sub {
	mu.Lock()
	defer mu.Unlock()
	s := &Sub{t: t, all: true, priors: map[int32]prior{}}
	t.subs = append(t.subs, s)
	return s
}

// Shared returns the tree's subscription named key, made by Subscribe on
// first use: a consumer that comes back to the tree (the sandbox, before
// each command) keeps its place in it without remembering the tree
// itself. It ends with the tree.
func (t *Tree) Shared(key string) *Sub {
	mu.Lock()
	defer mu.Unlock()
	if s := t.named[key]; s != nil {
		return s
	}
	s := &Sub{t: t, all: true, priors: map[int32]prior{}}
	t.subs = append(t.subs, s)
	if t.named == nil {
		t.named = map[string]*Sub{}
	}
	t.named[key] = s
	return s
}

// Mark syncs the tree and returns a new consumer that sees only what
// changes from now on.
func (t *Tree) Mark() *Sub {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
	t.hashStale()
	s := &Sub{t: t, priors: map[int32]prior{}}
	t.subs = append(t.subs, s)
	return s
}

// Close ends the subscription.
func (s *Sub) Close() {
	mu.Lock()
	defer mu.Unlock()
	s.t.subs = slices.DeleteFunc(s.t.subs, func(x *Sub) bool { return x == s })
}

// Take syncs the tree and returns, sorted, the entries changed since the
// previous Take ("." is always included: the root is cheap to look at).
func (s *Sub) Take() []string {
	mu.Lock()
	defer mu.Unlock()
	t := s.t
	t.sync()
	n := s.nids + len(s.gone) + 1
	if s.all {
		t.expandAll()
		n = int(t.count) + len(s.gone) + 1
	}
	out := make([]string, 1, n)
	out[0] = "."
	for _, g := range s.gone {
		out = append(out, g.rel)
	}
	if s.all {
		t.nodes.each(func(_ int32, rel string) { out = append(out, rel) })
	} else {
		s.eachID(func(id int32) { out = append(out, t.nodes.rel(id)) })
	}
	s.reset()
	slices.Sort(out[1:])
	return slices.Compact(out)
}

// TakeWhere syncs the tree and returns, sorted, "." and the entries
// changed since the previous Take whose stat as of this sync keep accepts;
// removed entries, which have no stat, are left out. A first TakeWhere
// looks at every entry's stat in memory but builds the path only of
// those kept: a tree filled from a manifest (Prefill) whose entries need
// nothing costs no path and no sort per entry.
func (s *Sub) TakeWhere(keep func(Entry) bool) []string {
	mu.Lock()
	defer mu.Unlock()
	t := s.t
	t.sync()
	out := []string{"."}
	add := func(id int32) {
		if keep(t.nodes.at(id).e) {
			out = append(out, t.nodes.rel(id))
		}
	}
	if s.all {
		for id := int32(1); id < t.nodes.n; id++ {
			if t.nodes.at(id).parent != free {
				add(id)
			}
		}
		t.eachLazy(func(dir int32, name string, e Entry, _ Sum) {
			if keep(e) {
				out = append(out, join(t.nodes.rel(dir), name))
			}
		})
	} else {
		s.eachID(add)
	}
	s.reset()
	slices.Sort(out[1:])
	return slices.Compact(out)
}

// FileChange is a regular file's content before and after: Had (Before)
// for a file at the Mark or previous Take, Has (After, Size, MTime) for
// one now. A file that cannot be read counts as none.
type FileChange struct {
	Rel           string
	Before, After Sum
	Had, Has      bool
	Size, MTime   int64
}

// TakeFiles syncs the tree and returns, sorted by path, the regular files
// whose content changed, appeared or went since the previous Take (the
// first TakeFiles of a Sub made by Subscribe lists every file as new). A
// file whose content is the same (a chmod, a rewrite with the same bytes)
// is left out. Its cost grows with the files whose content changed.
func (s *Sub) TakeFiles() []FileChange {
	mu.Lock()
	defer mu.Unlock()
	t := s.t
	t.sync()
	t.hashStale()
	n := len(s.gone) + len(s.priors)
	if s.all {
		t.expandAll()
		n += int(t.count)
	}
	out := make([]FileChange, 0, n)
	for _, g := range s.gone {
		out = append(out, FileChange{Rel: g.rel, Before: g.prior.sum, Had: g.prior.file})
	}
	now := func(id int32, rel string, p prior) {
		n := t.nodes.at(id)
		out = append(out, FileChange{Rel: rel, Before: p.sum, Had: p.file, After: n.sum, Has: n.hashed, Size: n.e.Size, MTime: n.e.MTime})
	}
	if s.all {
		t.nodes.each(func(id int32, rel string) {
			if t.nodes.at(id).hashed {
				now(id, rel, prior{})
			}
		})
	} else {
		for id, p := range s.priors { // a removed node's prior went to gone
			now(id, t.nodes.rel(id), p)
		}
	}
	s.reset()
	// A path removed and made again is one change: its first Before, its
	// last After.
	slices.SortStableFunc(out, func(a, b FileChange) int { return strings.Compare(a.Rel, b.Rel) })
	kept := out[:0]
	for _, c := range out {
		if k := len(kept) - 1; k >= 0 && kept[k].Rel == c.Rel {
			kept[k].After, kept[k].Has, kept[k].Size, kept[k].MTime = c.After, c.Has, c.Size, c.MTime
			continue
		}
		kept = append(kept, c)
	}
	out = kept[:0]
	for _, c := range kept {
		if c.Had != c.Has || c.Had && c.Before != c.After {
			out = append(out, c)
		}
	}
	return out
}

// eachID calls f on every live node marked changed.
func (s *Sub) eachID(f func(id int32)) {
	t := s.t
	for w, word := range s.ids {
		for ; word != 0; word &= word - 1 {
			id := int32(w<<6 | bits.TrailingZeros64(word))
			if id > 0 && id < t.nodes.n && t.nodes.at(id).parent != free {
				f(id)
			}
		}
	}
}

func (s *Sub) reset() {
	s.all, s.gone, s.goneKept, s.nids = false, nil, 0, 0
	clear(s.ids)
	if len(s.priors) > 0 {
		s.priors = map[int32]prior{}
	}
}

// mark records that id changed, and, when its content changed (content),
// what its content was before if this is the first such change since the
// last Take.
func (s *Sub) mark(id int32, p prior, content bool) {
	w, bit := int(id>>6), uint64(1)<<(id&63)
	if w >= len(s.ids) {
		s.ids = slices.Grow(s.ids, w+1-len(s.ids))[:w+1]
	}
	if s.ids[w]&bit == 0 {
		s.ids[w] |= bit
		s.nids++
	}
	if _, ok := s.priors[id]; content && !ok {
		s.priors[id] = p
	}
}

// removed records that node id (at rel, now p) is gone: its first state
// since the last Take goes with its path, and its bit is cleared for the
// node that reuses the id. A Sub that is not taken from keeps each path
// once (sorted and compacted when the list has doubled).
func (s *Sub) removed(id int32, rel string, p prior) {
	if w, bit := int(id>>6), uint64(1)<<(id&63); w < len(s.ids) && s.ids[w]&bit != 0 {
		s.ids[w] &^= bit
		s.nids--
	}
	if first, ok := s.priors[id]; ok {
		p = first
		delete(s.priors, id)
	}
	s.gone = append(s.gone, goneEntry{rel: rel, prior: p})
	if len(s.gone) >= max(4096, 2*s.goneKept) {
		slices.SortStableFunc(s.gone, func(a, b goneEntry) int { return strings.Compare(a.rel, b.rel) })
		s.gone = slices.CompactFunc(s.gone, func(a, b goneEntry) bool { return a.rel == b.rel })
		s.goneKept = len(s.gone)
	}
}
