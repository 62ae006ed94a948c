package board

import (
	"fmt"
	"slices"
	"strings"
)

// Counts is how many items are in each state.
type Counts struct {
	Open       int `json:"open"`
	InProgress int `json:"in_progress"`
	Resolved   int `json:"resolved"`
	Cancelled  int `json:"cancelled"`
}

// Total is the number of items.
func (c Counts) Total() int { return c.Open + c.InProgress + c.Resolved + c.Cancelled }

// Len is the number of items, closed ones included.
func (b *Board) Len() int { return len(b.items) }

// Get returns a copy of an item; the id may be written loosely ("t3").
func (b *Board) Get(id string) (Item, error) {
	it, err := b.get(id)
	if err != nil {
		return Item{}, err
	}
	return clone(it), nil
}

// Items returns copies of all items in id order.
func (b *Board) Items() []Item {
	out := make([]Item, 0, len(b.items))
	for _, it := range b.items {
		out = append(out, clone(it))
	}
	return out
}

// Active returns copies of the open and in-progress items in id order.
func (b *Board) Active() []Item {
	var out []Item
	for _, it := range b.items {
		if it.State.Active() {
			out = append(out, clone(it))
		}
	}
	return out
}

// Ready is nil when the item is open or in progress and all its deps are
// resolved, so that it may be dispatched; otherwise an error says what is
// missing (the unresolved deps with their states, or the item's own state).
func (b *Board) Ready(id string) error {
	it, err := b.get(id)
	if err != nil {
		return err
	}
	if !it.State.Active() {
		return fmt.Errorf("%w: %s is %s; board_reopen it to work on it again", ErrState, it.ID, it.State)
	}
	var waiting []string
	cancelled := false
	for _, d := range it.Deps {
		switch dep := b.item(d); dep.State {
		case Resolved:
		case Cancelled:
			cancelled = true
			waiting = append(waiting, d+" (cancelled)")
		default:
			waiting = append(waiting, fmt.Sprintf("%s (%s)", d, dep.State))
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	hint := "resolve them first"
	if cancelled {
		hint = "resolve them first; drop a cancelled dep with board_update, or cancel " + it.ID
	}
	return fmt.Errorf("%w: %s waits on %s; %s", ErrNotReady, it.ID, strings.Join(waiting, ", "), hint)
}

// Dependents returns the ids of the items that depend directly on id.
func (b *Board) Dependents(id string) []string {
	c := canon(id)
	var out []string
	for _, it := range b.items {
		if slices.Contains(it.Deps, c) {
			out = append(out, it.ID)
		}
	}
	return out
}

// Unlocked returns the direct dependents of resolvedID that are now ready:
// what resolving it made dispatchable (R-BOARD-3).
func (b *Board) Unlocked(resolvedID string) []string {
	var out []string
	for _, d := range b.Dependents(resolvedID) {
		if b.Ready(d) == nil {
			out = append(out, d)
		}
	}
	return out
}

// Counts tallies the items by state.
func (b *Board) Counts() Counts {
	var c Counts
	for _, it := range b.items {
		switch it.State {
		case Open:
			c.Open++
		case InProgress:
			c.InProgress++
		case Resolved:
			c.Resolved++
		case Cancelled:
			c.Cancelled++
		}
	}
	return c
}

// descendants returns the items that depend on id, transitively, in id
// order. An update may point deps at later items, so this iterates to a
// fixed point rather than relying on id order.
func (b *Board) descendants(id string) []*Item {
	seen := map[string]bool{id: true}
	for changed := true; changed; {
		changed = false
		for _, it := range b.items {
			if seen[it.ID] {
				continue
			}
			for _, d := range it.Deps {
				if seen[d] {
					seen[it.ID], changed = true, true
					break
				}
			}
		}
	}
	var out []*Item
	for _, it := range b.items {
		if it.ID != id && seen[it.ID] {
			out = append(out, it)
		}
	}
	return out
}

// cycle returns the cycle id → d → … → id that giving id the deps would
// close, or nil. It follows the first path found, in dep order.
func (b *Board) cycle(id string, deps []string) []string {
	seen := map[string]bool{}
	var walk func(from string) []string // path from → … → id
	walk = func(from string) []string {
		if from == id {
			return []string{id}
		}
		if seen[from] {
			return nil
		}
		seen[from] = true
		it := b.item(from)
		if it == nil {
			return nil
		}
		for _, d := range it.Deps {
			if p := walk(d); p != nil {
				return append([]string{from}, p...)
			}
		}
		return nil
	}
	for _, d := range sortIDs(deps) {
		if p := walk(d); p != nil {
			return append([]string{id}, p...)
		}
	}
	return nil
}

func clone(it *Item) Item {
	c := *it
	c.Owners = slices.Clone(it.Owners)
	c.Deps = slices.Clone(it.Deps)
	c.Refs = slices.Clone(it.Refs)
	c.History = slices.Clone(it.History)
	return c
}

// Clone returns an independent copy of the board, at the same seq.
func (b *Board) Clone() *Board {
	c := &Board{seq: b.seq, items: make([]*Item, len(b.items))}
	for i, it := range b.items {
		cp := clone(it)
		c.items[i] = &cp
	}
	return c
}
