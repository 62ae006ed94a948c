package worktree

import (
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/workspace"
)

// A baseline is kept compact and shared: the shared directory's files as
// fixed-size sums (not hash text) and its links, in a base that worktrees
// dispatched one after the other share, plus each worktree's own entries
// over it (what changed in shared since the base was made, and the merges
// it applied). So a Create costs what changed since the base, not a copy
// of every path.

// base is the files and links of a directory at one moment. Once a
// baseline holds it, it is never written again.
type base struct {
	files map[string]workspace.Sum
	links map[string]string // rel -> target
}

func newBase() *base {
	return &base{files: map[string]workspace.Sum{}, links: map[string]string{}}
}

// get is the state of rel in the form of a baseline entry.
func (b *base) get(rel string) (string, bool) {
	if s, ok := b.files[rel]; ok {
		return s.String(), true
	}
	if t, ok := b.links[rel]; ok {
		return linkPrefix + t, true
	}
	return "", false
}

// put sets rel to state ("" removes it).
func (b *base) put(rel, state string) {
	delete(b.files, rel)
	delete(b.links, rel)
	switch {
	case state == "":
	case strings.HasPrefix(state, linkPrefix):
		b.links[rel] = state[len(linkPrefix):]
	default:
		b.files[rel] = sumOf(state)
	}
}

// putFile sets rel to the file of content sum.
func (b *base) putFile(rel string, sum workspace.Sum) {
	delete(b.links, rel)
	b.files[rel] = sum
}

func (b *base) clone() *base {
	return &base{files: maps.Clone(b.files), links: maps.Clone(b.links)}
}

// sumOf parses a content hash; one that is not (never made here) is the
// zero Sum, which no content has.
func sumOf(h string) workspace.Sum {
	var s workspace.Sum
	raw, ok := strings.CutPrefix(h, workspace.HashPrefix)
	if ok && len(raw) == 2*len(s) {
		if _, err := hex.Decode(s[:], []byte(raw)); err == nil {
			return s
		}
	}
	return workspace.Sum{}
}

// baseline is a worktree's record of shared at Create: a base and the
// worktree's own entries over it ("": absent).
type baseline struct {
	base *base
	over map[string]string
}

func newBaseline() *baseline { return &baseline{base: newBase(), over: map[string]string{}} }

// baselineOf holds m (path -> state) as a baseline of its own.
func baselineOf(m map[string]string) *baseline {
	b := newBaseline()
	for rel, s := range m {
		b.base.put(rel, s)
	}
	return b
}

// get is rel's state at Create ("" and false if it had none).
func (b *baseline) get(rel string) (string, bool) {
	if s, ok := b.over[rel]; ok {
		return s, s != ""
	}
	return b.base.get(rel)
}

// state is get without the flag.
func (b *baseline) state(rel string) string {
	s, _ := b.get(rel)
	return s
}

// set records rel's new state ("" for gone).
func (b *baseline) set(rel, state string) { b.over[rel] = state }

// each calls f on every path the baseline has, in no order.
func (b *baseline) each(f func(rel string)) {
	for rel, s := range b.over {
		if s != "" {
			f(rel)
		}
	}
	for rel := range b.base.files {
		if _, ok := b.over[rel]; !ok {
			f(rel)
		}
	}
	for rel := range b.base.links {
		if _, ok := b.over[rel]; !ok {
			f(rel)
		}
	}
}

// sortedKeys lists the baseline's paths, sorted.
func (b *baseline) sortedKeys() []string {
	keys := make([]string, 0, len(b.base.files)+len(b.base.links)+len(b.over))
	b.each(func(rel string) { keys = append(keys, rel) })
	slices.Sort(keys)
	return keys
}
