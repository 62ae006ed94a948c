package worktree

import (
	"sync"

	"github.com/apodex/apodex/internal/watch"
)

// Manager is what the worktrees of one owner (a run's session) share: the
// Set their directories are watched in, each shared directory's index and
// stat cache, and the in-process locks that serialise merges into a shared
// directory (flock(2) serialises them across processes, and across
// Managers). Nothing of it is process-wide: it lives as long as its owner
// keeps it, and Close drops it. Its methods are safe for concurrent use.
type Manager struct {
	set, own  *watch.Set // own: made by NewManager, closed by Close
	viewOwner *[2]int    // OwnViews

	mu      sync.Mutex
	caches  map[string]*statCache   // absolute dir -> stat cache
	indexes map[string]*sharedIndex // absolute shared dir -> index
	locks   map[string]*sync.Mutex  // absolute shared dir -> merge lock
}

// NewManager returns a Manager whose worktrees are watched in set (the
// run's, shared with its planes); nil: a Set of its own, closed by Close.
func NewManager(set *watch.Set) *Manager {
	m := &Manager{set: set, caches: map[string]*statCache{}, indexes: map[string]*sharedIndex{}, locks: map[string]*sync.Mutex{}}
	if set == nil {
		m.own = watch.NewSet()
		m.set = m.own
	}
	return m
}

// Watch is the Set the Manager's directories are watched in.
func (m *Manager) Watch() *watch.Set { return m.set }

// Close drops the indexes and caches and closes the Manager's own Set (a
// given one is its owner's to close). Worktrees still open keep working
// as copies do, without the shared index.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.caches)
	clear(m.indexes)
	m.own.Close()
}

func (m *Manager) cacheFor(dir string) *statCache {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.caches[dir]
	if c == nil {
		c = &statCache{}
		m.caches[dir] = c
	}
	return c
}

func (m *Manager) indexFor(dir string) *sharedIndex {
	m.mu.Lock()
	defer m.mu.Unlock()
	ix := m.indexes[dir]
	if ix == nil {
		ix = &sharedIndex{}
		m.indexes[dir] = ix
	}
	return ix
}

func (m *Manager) lockFor(shared string) *sync.Mutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.locks[shared]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[shared] = l
	}
	return l
}
