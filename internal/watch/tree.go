package watch

import (
	"os"
	"strings"
)

// A tree's entries are nodes in fixed-size chunks (stable addresses, no
// copy when the tree grows), linked to their parent and siblings, and found
// by (parent, name) in one map. A node keeps one path element, not its
// path, and a regular file's content hash: 100,000 entries cost about
// 170 bytes each, and consumers keep no copy of their own.

// node is one entry of a tree; node 0 is the root.
type node struct {
	name            string // one path element ("" for the root and free nodes)
	e               Entry
	sum             Sum   // the content of a regular file, when hashed
	parent          int32 // none for the root, free for a free node
	kid, next, prev int32 // first child; siblings
	wd              int32 // the watch of a watched directory, else none
	hashed          bool  // sum holds: a regular file read at its last hash
	stale           bool  // changed since: to hash again (Tree.stale lists it)
	lazy            bool  // a directory whose files are still only its tree's Prefill's
}

const (
	none int32 = -1
	free int32 = -2

	chunkBits = 12
	chunkLen  = 1 << chunkBits
)

// key finds a node by its parent and name.
type key struct {
	parent int32
	name   string
}

// nodes is a tree's node store.
type nodes struct {
	chunks [][]node
	n      int32   // nodes allocated (live and free)
	frees  []int32 // free nodes, reused first
	ids    map[key]int32
	expand func(id int32) // makes the nodes of a lazy directory's files
}

func (s *nodes) at(id int32) *node { return &s.chunks[id>>chunkBits][id&(chunkLen-1)] }

// init makes the store hold only the root.
func (s *nodes) init() {
	*s = nodes{ids: map[key]int32{}, expand: s.expand}
	s.alloc()
	*s.at(0) = node{parent: none, kid: none, next: none, prev: none, wd: none}
}

func (s *nodes) alloc() int32 {
	if k := len(s.frees); k > 0 {
		id := s.frees[k-1]
		s.frees = s.frees[:k-1]
		return id
	}
	// The first chunk grows from small (a tree of a few entries, or a
	// forgotten one, stays small); the others are made whole. No caller
	// holds a *node across alloc.
	last := len(s.chunks) - 1
	if last < 0 || len(s.chunks[last]) == chunkLen {
		size := chunkLen
		if last < 0 {
			size = 16
		}
		s.chunks = append(s.chunks, make([]node, 0, size))
		last++
	}
	s.chunks[last] = append(s.chunks[last], node{})
	s.n++
	return s.n - 1
}

// child returns the child of parent named name, or none; a file of a
// lazy directory gets its node (and its siblings theirs) first.
func (s *nodes) child(parent int32, name string) int32 {
	if id, ok := s.ids[key{parent, name}]; ok {
		return id
	}
	if s.at(parent).lazy {
		s.expand(parent)
		return s.child(parent, name)
	}
	return none
}

// find returns the node of rel ("" the root), or none.
func (s *nodes) find(rel string) int32 {
	id := int32(0)
	for rel != "" && id != none {
		name, rest, _ := strings.Cut(rel, "/")
		id, rel = s.child(id, name), rest
	}
	return id
}

// add links a new node named name under parent.
func (s *nodes) add(parent int32, name string, e Entry) int32 {
	id := s.alloc()
	p := s.at(parent)
	*s.at(id) = node{name: name, parent: parent, kid: none, next: p.kid, prev: none, wd: none, e: e}
	if p.kid != none {
		s.at(p.kid).prev = id
	}
	p.kid = id
	s.ids[key{parent, name}] = id
	return id
}

// drop unlinks and frees a node that has no children.
func (s *nodes) drop(id int32) {
	n := s.at(id)
	if n.prev != none {
		s.at(n.prev).next = n.next
	} else {
		s.at(n.parent).kid = n.next
	}
	if n.next != none {
		s.at(n.next).prev = n.prev
	}
	delete(s.ids, key{n.parent, n.name})
	*n = node{parent: free, kid: none, next: none, prev: none, wd: none}
	s.frees = append(s.frees, id)
}

// rel is the node's slash-separated path relative to the root.
func (s *nodes) rel(id int32) string {
	if id == 0 {
		return ""
	}
	size, depth := -1, 0
	for x := id; x != 0; x = s.at(x).parent {
		size += len(s.at(x).name) + 1
		depth++
	}
	b := make([]byte, size)
	end := size
	for x := id; x != 0; x = s.at(x).parent {
		name := s.at(x).name
		copy(b[end-len(name):end], name)
		end -= len(name)
		if end > 0 {
			end--
			b[end] = '/'
		}
	}
	return string(b)
}

// join is rel/name, or name at the root.
func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// each calls f on every live node but the root with its path.
func (s *nodes) each(f func(id int32, rel string)) {
	var walk func(id int32, rel string)
	walk = func(id int32, rel string) {
		for k := s.at(id).kid; k != none; k = s.at(k).next {
			r := join(rel, s.at(k).name)
			f(k, r)
			walk(k, r)
		}
	}
	walk(0, "")
}

// dirOpen opens rel ("" the root) in r as a directory to list.
func dirOpen(r *os.Root, rel string) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	return r.Open(rel)
}
