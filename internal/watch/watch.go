// Package watch keeps what it knows of directory trees current from kernel
// change notification (inotify), so a caller learns what changed below a
// directory since it last asked at a cost that grows with the changes, not
// with the number of untouched entries.
//
// Guarantees:
//   - a Sub's Take returns every entry (file, directory, link, other; as a
//     slash-separated path relative to the tree's root) that was created,
//     removed, or whose type, mode, owner, size, mtime or inode changed
//     since its previous Take, plus "." for the root itself; its first Take
//     returns every entry. Changes by any process count, in any mount
//     namespace that binds these directories: the kernel queues an event
//     before the changing system call returns, so once a command has
//     exited, everything it did is seen;
//   - when notification cannot tell (no inotify here, the watch limit
//     reached, the kernel queue overflowed, the root replaced) the tree
//     rescans itself in full: slower, never less exact;
//   - entries are examined by lstat through an os.Root of the tree, so a
//     link never leads outside it, and watches never follow links;
//   - an entry is listed again even when its stat is the same if it was
//     written to (IN_MODIFY, IN_CLOSE_WRITE), or if an event or a rescan
//     found its mtime within RacySlack of the time it was looked at (a
//     rewrite of the same size in the same clock tick, or one whose mtime
//     was set back, leaves the stat as it was);
//   - the tree keeps the content hash (Sum) of every regular file. A file
//     whose size, mtime or inode changed, or that was listed for a write
//     or as too recent, is read again when a consumer asks for content
//     (Mark, TakeFiles), not at every sync (a quota poll only stats); a
//     change of owner or mode alone keeps the hash. Files are read through
//     a descriptor of their directory: never through a link, never
//     blocking on a FIFO. A Sub's TakeFiles gives, for each file whose
//     content changed, appeared or went since its previous Take, the hash
//     before and after, at a cost that grows with those files; every
//     consumer of a directory shares its one tree's hashes;
//   - Usage is the tree's allocated bytes, regular files' sizes and entry
//     count after the last Sync, kept as running totals;
//   - a tree's first For walks its directory, or, given a Prefill (what a
//     caller vouches the directory holds: a world's stored manifest under
//     a fresh overlay), stats and watches only its directories and takes
//     every file's stat and hash from it; a Prefill that does not fit is
//     dropped and the directory walked;
//   - trees belong to a Set, the one owner that watches them (a run's
//     session): For gives the same tree for the same directory within a
//     Set, so every consumer of a directory shares its one tree's hashes;
//     Forget drops every watch and entry of a tree and ends its Subs (a
//     Sub still held then lists nothing), a later For makes a new tree;
//     Close forgets every tree of the Set, and nothing outside a Set
//     remembers a tree;
//
// A tree keeps about 170 bytes per entry (one path element and the hash
// each, see tree.go) and allocates nothing per untouched entry on the
// steady path; a Sub keeps a bit per entry and what changed.
//
// Writes through a shared memory mapping raise no event of their own; the
// closing of the file written (IN_CLOSE_WRITE) does, so a file mapped and
// changed by a command is seen once the command has exited.
package watch

import (
	"cmp"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Entry is the stat of one entry that tells it changed.
type Entry struct {
	Size     int64
	Blocks   int64 // 512-byte blocks allocated
	Ino      uint64
	MTime    int64 // ns
	Mode     fs.FileMode
	UID, GID uint32
}

// RacySlack covers coarse file timestamps: a file whose mtime is less than
// this before the moment it was looked at may be rewritten with the same
// stat (the "racy git" problem).
const RacySlack = 50 * time.Millisecond

// Tree is one watched directory. Its methods are safe for concurrent use.
type Tree struct {
	home      *Set // the Set it belongs to
	root      string
	r         *os.Root
	nodes     nodes
	dirty     map[string]bool // entries events named since the last sync: written to?
	rescan    bool            // the next Sync walks the whole tree
	forgotten bool            // Forget ended it: no watch, no entry, no sync
	subs      []*Sub
	named     map[string]*Sub // see Shared
	now       int64           // ns, when this sync began
	seen      []bool          // by node, during full
	stack     []int32         // directories still to list, during a walk
	stale     []int32         // files to hash again (see hashStale)
	known     Known           // during the first walk: see Set.Seed
	lazy      *lazy           // files still only in the Prefill (fill.go)

	blocks, apparent, count int64
}

// The trees of every Set share one inotify descriptor, which dispatches
// each kernel event to the trees watching its directory, and one lock. It
// holds nothing of a tree once the tree is forgotten.
var (
	mu    sync.Mutex
	owner = map[int32][]treeDir{} // watch descriptor -> where it points
	ifd   = -2                    // -2: not opened yet; -1: unavailable
	buf   = make([]byte, 64<<10)
)

type treeDir struct {
	t  *Tree
	id int32
}

// forget is Forget of t. mu is held.
func (t *Tree) forget() {
	delete(t.home.trees, t.root)
	t.forgotten = true
	t.r.Close()
	t.clear()
	// Its subscribers see nothing more; a For of the directory makes a
	// new tree.
	for _, s := range t.subs {
		s.reset()
	}
	t.subs, t.named = nil, nil
}

// clear drops every watch and entry of the tree but its root's node. mu
// is held.
func (t *Tree) clear() {
	t.nodes.each(func(id int32, _ string) {
		if wd := t.nodes.at(id).wd; wd != none {
			t.unwatch(id, wd)
		}
	})
	if wd := t.nodes.at(0).wd; wd != none {
		t.unwatch(0, wd)
	}
	t.dirty, t.stale, t.lazy = nil, nil, nil
	t.nodes.init()
	t.blocks, t.apparent, t.count = 0, 0, 0
}

// Watches is the number of directory watches the tree holds (0 once
// forgotten).
func (t *Tree) Watches() int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, ds := range owner {
		for _, d := range ds {
			if d.t == t {
				n++
			}
		}
	}
	return n
}

// Mode is the type and mode of rel as of the last sync (false if the tree
// has no such entry).
func (t *Tree) Mode(rel string) (fs.FileMode, bool) {
	mu.Lock()
	defer mu.Unlock()
	if id := t.nodes.find(rel); id > 0 {
		return t.nodes.at(id).e.Mode, true
	}
	return 0, false
}

// Entry is the stat of rel as of the last sync (false if the tree has no
// such entry, or rel is the root).
func (t *Tree) Entry(rel string) (Entry, bool) {
	mu.Lock()
	defer mu.Unlock()
	if id := t.nodes.find(rel); id > 0 {
		return t.nodes.at(id).e, true
	}
	return Entry{}, false
}

// Links lists the tree's symbolic links as of the last sync, in no order.
func (t *Tree) Links() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for id := int32(1); id < t.nodes.n; id++ {
		if n := t.nodes.at(id); n.parent != free && n.e.Mode&fs.ModeSymlink != 0 {
			out = append(out, t.nodes.rel(id))
		}
	}
	return out
}

// Root is the tree's directory.
func (t *Tree) Root() string { return t.root }

// Sync takes in every change the kernel reported since the last Sync.
func (t *Tree) Sync() {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
}

// Usage syncs and returns the tree's allocated bytes, the sizes of its
// regular files and its number of entries (the root excluded).
func (t *Tree) Usage() (blocks, apparent, count int64) {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
	return t.blocks, t.apparent, t.count
}

// sync drains the kernel queue (for every tree) and examines what this
// tree's events named. mu is held.
func (t *Tree) sync() {
	drain()
	t.now = time.Now().UnixNano()
	if t.forgotten {
		return
	}
	if t.rescan || ifd < 0 {
		t.rescan, t.dirty = false, nil
		t.full()
		return
	}
	dirty := t.dirty
	t.dirty = nil
	for rel, written := range dirty {
		t.look(rel, written)
	}
}

// full walks the whole tree: every entry is looked at, those gone removed.
func (t *Tree) full() {
	if r, err := os.OpenRoot(t.root); err == nil {
		t.r.Close() // the root may have been replaced
		t.r = r
	}
	t.watchDir(0, "")
	t.seen = make([]bool, t.nodes.n)
	t.walk(0)
	seen := t.seen
	t.seen = nil
	for id := int32(1); id < int32(len(seen)); id++ {
		if !seen[id] && t.nodes.at(id).parent != free {
			t.remove(id)
		}
	}
}

// look examines one entry an event named; written: the event was a write
// (the content may have changed with the stat as it was: a write in
// place with the mtime set back).
func (t *Tree) look(rel string, written bool) {
	dir, name := path.Split(rel)
	parent := t.nodes.find(path.Clean("/" + dir)[1:])
	if parent == none {
		return // its directory is gone, or not listed yet: its walk sees it
	}
	fi, err := t.r.Lstat(rel)
	if err != nil {
		if id := t.nodes.child(parent, name); id != none {
			t.remove(id)
		}
		return
	}
	if id := t.set(parent, name, entryOf(fi), rel, written); id != none {
		t.walk(id)
	}
}

// walk records everything below the directory id, already watched. It
// lists each directory through the tree's os.Root and stats its entries
// relative to the listing (no path per entry, no link followed).
func (t *Tree) walk(id int32) {
	t.stack = append(t.stack[:0], id)
	for len(t.stack) > 0 {
		dir := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		rel := t.nodes.rel(dir)
		f, err := dirOpen(t.r, rel)
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(-1)
		for _, name := range names {
			e, err := lstatIn(f, name)
			if err != nil {
				continue
			}
			kid := t.set(dir, name, e, "", false)
			if kid != none && e.Mode.IsDir() {
				t.stack = append(t.stack, kid)
			}
		}
		f.Close()
	}
}

// set records the stat of parent's entry name (rel: its path, "" to build
// it when needed), marks a regular file whose content may have changed to
// be hashed again, tells the subscribers if it changed (or was written,
// or is too recent to trust), and watches a new directory. It returns the
// entry's node, or none if it is a directory the walk need not list again.
func (t *Tree) set(parent int32, name string, e Entry, rel string, written bool) int32 {
	id := t.nodes.child(parent, name)
	if id != none && t.replacedDir(id, e) {
		t.remove(id) // its contents are gone; the new one is watched and listed
		id = none
	}
	fresh := id == none
	if fresh {
		id = t.nodes.add(parent, name, e)
		t.account(e, 1)
	}
	t.mark(id)
	n := t.nodes.at(id)
	racy := e.MTime >= t.now-int64(RacySlack)
	if !fresh && n.e == e && !racy && !written {
		if e.Mode.IsDir() && t.seen != nil {
			if n.wd == none {
				t.watchDir(id, rel) // its watch was lost: try again
			}
			return id // a rescan lists every directory
		}
		return none
	}
	p := prior{sum: n.sum, file: n.hashed && !fresh}
	wasDir := !fresh && n.e.Mode.IsDir()
	content := false // its content may have changed
	switch old := n.e; {
	case !e.Mode.IsRegular():
		content = p.file
		n.sum, n.hashed, n.stale = Sum{}, false, false
	case fresh || !n.hashed || written || racy || !old.Mode.IsRegular() ||
		old.Size != e.Size || old.MTime != e.MTime || old.Ino != e.Ino:
		// A change of owner or mode alone leaves the content as it was;
		// otherwise it is hashed again when a consumer asks.
		content = true
		if fresh && t.known != nil && !racy {
			if sum, ok := t.known(t.nodes.rel(id), e); ok {
				n.sum, n.hashed = sum, true
				break
			}
		}
		if !n.stale {
			n.stale = true
			t.stale = append(t.stale, id)
		}
	}
	if !fresh {
		t.account(n.e, -1)
		t.account(e, 1)
		n.e = e
	}
	for _, s := range t.subs {
		s.mark(id, p, content)
	}
	if !e.Mode.IsDir() {
		return none
	}
	if !wasDir {
		// New here (created, or moved in): watch it before listing it,
		// so nothing created meanwhile is missed.
		t.watchDir(id, rel)
		return id
	}
	if t.seen != nil {
		return id
	}
	return none
}

// replacedDir tells whether the directory id now has e in its place: a
// file, or another directory (which may have the same inode number: its
// watch went with the old one).
func (t *Tree) replacedDir(id int32, e Entry) bool {
	n := t.nodes.at(id)
	return n.e.Mode.IsDir() && (!e.Mode.IsDir() || n.e.Ino != e.Ino || n.wd == none && ifd >= 0)
}

func (t *Tree) mark(id int32) {
	if t.seen == nil {
		return
	}
	for int(id) >= len(t.seen) {
		t.seen = append(t.seen, false)
	}
	t.seen[id] = true
}

// remove forgets id and everything below it.
func (t *Tree) remove(id int32) {
	t.expand(id) // its files, each removed with what it held
	n := t.nodes.at(id)
	for k := n.kid; k != none; {
		next := t.nodes.at(k).next
		t.remove(k)
		k = next
	}
	if len(t.subs) > 0 {
		rel, p := t.nodes.rel(id), prior{sum: n.sum, file: n.hashed}
		for _, s := range t.subs {
			s.removed(id, rel, p)
		}
	}
	if n.wd != none {
		t.unwatch(id, n.wd)
	}
	t.account(n.e, -1)
	t.nodes.drop(id)
}

// hashStale hashes every file whose content may have changed since it was
// last hashed, each directory opened once through the tree's os.Root; a
// file that is no longer the one its lstat saw, or cannot be read, has
// no content (hashed false) until it changes again. mu is held.
func (t *Tree) hashStale() {
	if len(t.stale) == 0 {
		return
	}
	slices.SortFunc(t.stale, func(a, b int32) int { return cmp.Compare(t.nodes.at(a).parent, t.nodes.at(b).parent) })
	var dir *os.File
	cur := none
	for _, id := range t.stale {
		n := t.nodes.at(id)
		if n.parent == free || !n.stale {
			continue // removed, or hashed already (its id is listed twice)
		}
		if n.parent != cur {
			if dir != nil {
				dir.Close()
			}
			cur, dir = n.parent, nil
			if f, err := dirOpen(t.r, t.nodes.rel(n.parent)); err == nil {
				dir = f
			}
		}
		n.stale = false
		n.sum, n.hashed = Sum{}, false
		if dir != nil {
			n.sum, n.hashed = hashIn(dir, n.name, n.e.Ino)
		}
	}
	if dir != nil {
		dir.Close()
	}
	t.stale = t.stale[:0]
	if cap(t.stale) > 4096 {
		t.stale = nil // a burst (the first walk): not kept
	}
}

func (t *Tree) account(e Entry, sign int64) {
	t.count += sign
	t.blocks += sign * e.Blocks * 512
	if e.Mode.IsRegular() {
		t.apparent += sign * e.Size
	}
}

// watchDir adds a watch on id (rel: its path, "" to build it); a failure
// makes every Sync a full walk.
func (t *Tree) watchDir(id int32, rel string) {
	if ifd < 0 || t.forgotten {
		return
	}
	if rel == "" {
		rel = t.nodes.rel(id)
	}
	wd, err := addWatch(ifd, filepath.Join(t.root, filepath.FromSlash(rel)))
	if err != nil {
		t.rescan = true
		return
	}
	n := t.nodes.at(id)
	if n.wd != none && n.wd != wd {
		t.unwatch(id, n.wd)
	}
	n.wd = wd
	ds := slices.DeleteFunc(owner[wd], func(d treeDir) bool { return d.t == t && d.id == id })
	owner[wd] = append(ds, treeDir{t: t, id: id})
}

// unwatch drops this tree's claim on wd (the kernel watch stays while
// another tree or a moved directory uses it; IN_IGNORED clears it).
func (t *Tree) unwatch(id int32, wd int32) {
	t.nodes.at(id).wd = none
	ds := slices.DeleteFunc(owner[wd], func(d treeDir) bool { return d.t == t && d.id == id })
	if len(ds) == 0 {
		delete(owner, wd)
		rmWatch(ifd, wd)
		return
	}
	owner[wd] = ds
}

// event dispatches one kernel event. mu is held.
func event(wd int32, mask uint32, name string) {
	if mask&inQOverflow != 0 {
		// Every watched tree has a directory in owner; one whose watch
		// failed rescans anyway.
		for _, ds := range owner {
			for _, d := range ds {
				d.t.rescan = true
			}
		}
		return
	}
	for _, d := range owner[wd] {
		t := d.t
		switch {
		case mask&inIgnored != 0:
			if n := t.nodes.at(d.id); n.wd == wd {
				n.wd = none
			}
			if d.id == 0 {
				t.rescan = true
			}
		case d.id == 0 && name == "" && mask&(inSelf) != 0:
			t.rescan = true
		case name == "":
			if d.id != 0 {
				t.dirt(t.nodes.rel(d.id), mask&inWrite != 0)
			}
		default:
			t.dirt(join(t.nodes.rel(d.id), name), mask&inWrite != 0)
		}
	}
	if mask&inIgnored != 0 {
		delete(owner, wd)
	}
}

func (t *Tree) dirt(rel string, written bool) {
	if t.dirty == nil {
		t.dirty = map[string]bool{}
	}
	t.dirty[rel] = t.dirty[rel] || written
}
