package watch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Set is the trees one owner watches, by directory. Its methods are safe
// for concurrent use.
type Set struct {
	trees  map[string]*Tree    // root -> tree; mu guards it
	known  map[string]Known    // root -> what Seed gave for its first walk
	pre    map[string]*Prefill // root -> what Prefill gave for its first For
	closed bool
}

// Known gives the content hash of the regular file rel whose stat is e,
// when the caller knows it without reading the file (a world's stored
// manifest, proven by its seal): false to have it read.
type Known func(rel string, e Entry) (Sum, bool)

// Seed makes the first walk of dir's tree (the next For of it) take the
// hashes known gives instead of reading those files: a file that then
// changes is read as any other. The caller vouches for what known says.
func (s *Set) Seed(dir string, known Known) {
	mu.Lock()
	defer mu.Unlock()
	if s.known == nil {
		s.known = map[string]Known{}
	}
	s.known[filepath.Clean(dir)] = known
}

// NewSet returns an empty Set.
func NewSet() *Set { return &Set{trees: map[string]*Tree{}} }

// For returns the tree of dir (absolute), watching it from now on; the
// first call for a dir walks it once. After Close it is an error.
func (s *Set) For(dir string) (*Tree, error) {
	dir = filepath.Clean(dir)
	mu.Lock()
	defer mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if t := s.trees[dir]; t != nil {
		return t, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if ifd == -2 {
		ifd = inotifyInit()
	}
	t := &Tree{home: s, root: dir, r: r}
	t.nodes.expand = t.expand
	t.nodes.init()
	t.now = time.Now().UnixNano()
	t.watchDir(0, "")
	t.known = s.known[dir]
	if p := s.pre[dir]; p == nil || !t.fill(p) {
		t.walk(0)
	}
	t.known = nil
	delete(s.known, dir)
	delete(s.pre, dir)
	s.trees[dir] = t
	return t, nil
}

// ErrClosed is For on a closed Set.
var ErrClosed = errors.New("watch: the set is closed")

// Lookup returns the tree of dir if For made one, else nil.
func (s *Set) Lookup(dir string) *Tree {
	mu.Lock()
	defer mu.Unlock()
	return s.trees[filepath.Clean(dir)]
}

// Forget stops watching dir (e.g. a worktree being removed) and drops
// what its tree knew; a later For walks it anew.
func (s *Set) Forget(dir string) {
	dir = filepath.Clean(dir)
	mu.Lock()
	defer mu.Unlock()
	if t := s.trees[dir]; t != nil {
		t.forget()
	}
}

// ForgetUnder forgets every tree at or below dir (the directory of a
// worktree whose agents have all ended).
func (s *Set) ForgetUnder(dir string) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	mu.Lock()
	defer mu.Unlock()
	for root, t := range s.trees {
		if root == dir || strings.HasPrefix(root, dir+string(filepath.Separator)) {
			t.forget()
		}
	}
}

// Close forgets every tree of the set; For fails from then on. A nil Set
// closes as nothing.
func (s *Set) Close() {
	if s == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for _, t := range s.trees {
		t.forget()
	}
	s.closed = true
}

// Watching reports whether a tree of any Set watches dir (absolute) as its
// root: what a closed Set no longer does (tests and diagnostics).
func Watching(dir string) bool {
	dir = filepath.Clean(dir)
	mu.Lock()
	defer mu.Unlock()
	for _, ds := range owner {
		for _, d := range ds {
			if d.id == 0 && d.t.root == dir && !d.t.forgotten {
				return true
			}
		}
	}
	return false
}
