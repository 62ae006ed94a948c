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
//   - Usage is the tree's allocated bytes, regular files' sizes and entry
//     count after the last Sync, kept as running totals.
//
// Writes through a shared memory mapping raise no event of their own; the
// closing of the file written (IN_CLOSE_WRITE) does, so a file mapped and
// changed by a command is seen once the command has exited.
package watch

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// Entry is the stat of one entry that tells it changed.
type Entry struct {
	Mode     fs.FileMode
	Size     int64
	Blocks   int64 // 512-byte blocks allocated
	UID, GID uint32
	Ino      uint64
	MTime    int64 // ns
}

func entryOf(fi fs.FileInfo) Entry {
	e := Entry{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Blocks, e.UID, e.GID, e.Ino = st.Blocks, st.Uid, st.Gid, st.Ino
	}
	return e
}

// Tree is one watched directory. Its methods are safe for concurrent use.
type Tree struct {
	root    string
	r       *os.Root
	entries map[string]Entry               // rel -> stat; the root excluded
	kids    map[string]map[string]struct{} // rel dir ("" root) -> child names
	dirs    map[string]int32               // rel dir -> watch descriptor
	dirty   map[string]struct{}
	rescan  bool // the next Sync walks the whole tree
	subs    []*Sub

	blocks, apparent, count int64
}

// The trees of this process share one inotify descriptor and one lock.
var (
	mu    sync.Mutex
	trees = map[string]*Tree{}    // root -> tree
	owner = map[int32][]treeDir{} // watch descriptor -> where it points
	ifd   = -2                    // -2: not opened yet; -1: unavailable
	buf   = make([]byte, 64<<10)
)

type treeDir struct {
	t   *Tree
	rel string
}

// For returns the tree of dir (absolute), watching it from now on; the
// first call for a dir walks it once.
func For(dir string) (*Tree, error) {
	dir = filepath.Clean(dir)
	mu.Lock()
	defer mu.Unlock()
	if t := trees[dir]; t != nil {
		return t, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if ifd == -2 {
		ifd = inotifyInit()
	}
	t := &Tree{root: dir, r: r, entries: map[string]Entry{}, kids: map[string]map[string]struct{}{},
		dirs: map[string]int32{}, dirty: map[string]struct{}{}}
	t.watchDir("")
	t.walk("")
	trees[dir] = t
	return t, nil
}

// Lookup returns the tree of dir if For made one, else nil.
func Lookup(dir string) *Tree {
	mu.Lock()
	defer mu.Unlock()
	return trees[filepath.Clean(dir)]
}

// Forget stops watching dir (e.g. a worktree being removed).
func Forget(dir string) {
	dir = filepath.Clean(dir)
	mu.Lock()
	defer mu.Unlock()
	t := trees[dir]
	if t == nil {
		return
	}
	delete(trees, dir)
	for rel, wd := range t.dirs {
		t.unwatch(rel, wd)
	}
	t.r.Close()
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

// Sub is one consumer's view of a tree's changes.
type Sub struct {
	t       *Tree
	pending map[string]struct{}
}

// Subscribe returns a new consumer whose first Take lists every entry.
func (t *Tree) Subscribe() *Sub {
	mu.Lock()
	defer mu.Unlock()
	t.sync()
	s := &Sub{t: t, pending: make(map[string]struct{}, len(t.entries)+1)}
	for rel := range t.entries {
		s.pending[rel] = struct{}{}
	}
	t.subs = append(t.subs, s)
	return s
}

// Take syncs the tree and returns, sorted, the entries changed since the
// previous Take ("." is always included: the root is cheap to look at).
func (s *Sub) Take() []string {
	mu.Lock()
	defer mu.Unlock()
	s.t.sync()
	out := make([]string, 0, len(s.pending)+1)
	out = append(out, ".")
	for rel := range s.pending {
		out = append(out, rel)
	}
	clear(s.pending)
	slices.Sort(out[1:])
	return out
}

// Close ends the subscription.
func (s *Sub) Close() {
	mu.Lock()
	defer mu.Unlock()
	s.t.subs = slices.DeleteFunc(s.t.subs, func(x *Sub) bool { return x == s })
}

// sync drains the kernel queue (for every tree) and examines what this
// tree's events named. mu is held.
func (t *Tree) sync() {
	drain()
	if t.rescan || ifd < 0 {
		t.rescan = false
		clear(t.dirty)
		t.full()
		return
	}
	for rel := range t.dirty {
		delete(t.dirty, rel)
		t.look(rel)
	}
}

// full walks the whole tree: every entry is looked at, those gone removed.
func (t *Tree) full() {
	seen := make(map[string]struct{}, len(t.entries))
	_ = filepath.WalkDir(t.root, func(host string, d fs.DirEntry, err error) error {
		if err != nil || host == t.root {
			return nil
		}
		rel := filepath.ToSlash(host[len(t.root)+1:])
		seen[rel] = struct{}{}
		if d.IsDir() {
			t.watchDir(rel)
		}
		t.set(rel, d.Info)
		return nil
	})
	for rel := range t.entries {
		if _, ok := seen[rel]; !ok {
			t.remove(rel)
		}
	}
}

// look examines one entry an event named.
func (t *Tree) look(rel string) {
	fi, err := t.r.Lstat(rel)
	old, had := t.entries[rel]
	if err != nil {
		if had {
			t.remove(rel)
		}
		return
	}
	if had && old.Mode.IsDir() && !fi.IsDir() {
		t.remove(rel) // a directory replaced: its contents are gone
		had = false
	}
	t.set(rel, func() (fs.FileInfo, error) { return fi, nil })
	if fi.IsDir() && (!had || !old.Mode.IsDir()) {
		// New here (created, or moved in): watch it before listing it,
		// so nothing created meanwhile is missed.
		t.watchDir(rel)
		t.walk(rel)
	}
}

// walk records everything below rel, a directory just watched.
func (t *Tree) walk(rel string) {
	host := filepath.Join(t.root, filepath.FromSlash(rel))
	_ = filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == host {
			return nil
		}
		sub := filepath.ToSlash(p[len(t.root)+1:])
		if d.IsDir() {
			t.watchDir(sub)
		}
		t.set(sub, d.Info)
		return nil
	})
}

// set records rel's stat, and tells the subscribers if it changed.
func (t *Tree) set(rel string, info func() (fs.FileInfo, error)) {
	fi, err := info()
	if err != nil {
		return
	}
	e := entryOf(fi)
	old, had := t.entries[rel]
	if had && old == e {
		return
	}
	if had {
		t.account(old, -1)
	} else {
		dir, name := path.Split(rel)
		dir = path.Clean("/" + dir)[1:]
		k := t.kids[dir]
		if k == nil {
			k = map[string]struct{}{}
			t.kids[dir] = k
		}
		k[name] = struct{}{}
	}
	t.entries[rel] = e
	t.account(e, 1)
	t.changed(rel)
}

// remove forgets rel and everything below it.
func (t *Tree) remove(rel string) {
	old, ok := t.entries[rel]
	if !ok {
		return
	}
	for name := range t.kids[rel] {
		t.remove(rel + "/" + name)
	}
	delete(t.kids, rel)
	if wd, ok := t.dirs[rel]; ok {
		t.unwatch(rel, wd)
	}
	dir, name := path.Split(rel)
	dir = path.Clean("/" + dir)[1:]
	delete(t.kids[dir], name)
	delete(t.entries, rel)
	t.account(old, -1)
	t.changed(rel)
}

func (t *Tree) account(e Entry, sign int64) {
	t.count += sign
	t.blocks += sign * e.Blocks * 512
	if e.Mode.IsRegular() {
		t.apparent += sign * e.Size
	}
}

func (t *Tree) changed(rel string) {
	for _, s := range t.subs {
		s.pending[rel] = struct{}{}
	}
}

// watchDir adds a watch on rel; a failure makes every Sync a full walk.
func (t *Tree) watchDir(rel string) {
	if ifd < 0 {
		return
	}
	wd, err := addWatch(ifd, filepath.Join(t.root, filepath.FromSlash(rel)))
	if err != nil {
		t.rescan = true
		return
	}
	t.dirs[rel] = wd
	ds := slices.DeleteFunc(owner[wd], func(d treeDir) bool { return d.t == t })
	owner[wd] = append(ds, treeDir{t: t, rel: rel})
}

// unwatch drops this tree's claim on wd (the kernel watch stays while
// another tree or a moved directory uses it; IN_IGNORED clears it).
func (t *Tree) unwatch(rel string, wd int32) {
	delete(t.dirs, rel)
	ds := slices.DeleteFunc(owner[wd], func(d treeDir) bool { return d.t == t && d.rel == rel })
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
		for _, t := range trees {
			t.rescan = true
		}
		return
	}
	for _, d := range owner[wd] {
		switch {
		case mask&inIgnored != 0:
			if d.t.dirs[d.rel] == wd {
				delete(d.t.dirs, d.rel)
			}
			if d.rel == "" {
				d.t.rescan = true
			}
		case d.rel == "" && name == "" && mask&(inSelf) != 0:
			d.t.rescan = true
		case name == "":
			if d.rel != "" {
				d.t.dirty[d.rel] = struct{}{}
			}
		default:
			rel := name
			if d.rel != "" {
				rel = d.rel + "/" + name
			}
			d.t.dirty[rel] = struct{}{}
		}
	}
	if mask&inIgnored != 0 {
		delete(owner, wd)
	}
}
