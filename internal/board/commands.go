package board

import (
	"fmt"
	"slices"
	"strings"
)

// The commands validate a request, apply its event and return the event for
// the caller to record. by names who asked: an agent, "user" or "runtime".
// Ids may be written loosely ("t3", "3"); events carry the canonical form.

// Add appends a new open item and returns its event; the id is Event.ID.
// Unknown deps and deps on cancelled items are refused.
func (b *Board) Add(by, title, objective string, deps []string, group string) (Event, error) {
	title, objective = strings.TrimSpace(title), strings.TrimSpace(objective)
	if title == "" || objective == "" {
		return Event{}, fmt.Errorf("%w: an item needs a title and a bounded objective", ErrInvalid)
	}
	ds, err := b.validDeps(deps)
	if err != nil {
		return Event{}, err
	}
	return b.commit(Event{Op: OpAdd, ID: itemID(len(b.items) + 1), Title: &title, Objective: &objective,
		Deps: ds, Group: strings.TrimSpace(group), By: by})
}

// Update revises an active item. nil arguments are left unchanged; a
// pointer to an empty deps list clears the deps. A dep that would close a
// cycle is refused, naming the cycle.
func (b *Board) Update(by, id string, title, objective *string, deps *[]string) (Event, error) {
	it, err := b.active(id, "update")
	if err != nil {
		return Event{}, err
	}
	if title == nil && objective == nil && deps == nil {
		return Event{}, fmt.Errorf("%w: nothing to update on %s; give a title, an objective or deps", ErrInvalid, it.ID)
	}
	e := Event{Op: OpUpdate, ID: it.ID, By: by}
	for _, f := range []struct {
		in   *string
		out  **string
		name string
	}{{title, &e.Title, "title"}, {objective, &e.Objective, "objective"}} {
		if f.in == nil {
			continue
		}
		s := strings.TrimSpace(*f.in)
		if s == "" {
			return Event{}, fmt.Errorf("%w: the %s of %s cannot be empty; omit it to keep the current one", ErrInvalid, f.name, it.ID)
		}
		*f.out = &s
	}
	if deps != nil {
		ds, err := b.validDeps(*deps)
		if err != nil {
			return Event{}, err
		}
		if cyc := b.cycle(it.ID, ds); cyc != nil {
			return Event{}, fmt.Errorf("%w %s: %s would depend on itself; drop the dep on %s",
				ErrCycle, strings.Join(cyc, " → "), it.ID, cyc[1])
		}
		e.Deps = append([]string{}, ds...) // non-nil: set, even to none
	}
	return b.commit(e)
}

// Resolve marks an active item resolved with a note and evidence refs. It
// is refused while any dep is unresolved, naming them.
func (b *Board) Resolve(by, id, note string, refs []string) (Event, error) {
	it, err := b.active(id, "resolve")
	if err != nil {
		return Event{}, err
	}
	if note = strings.TrimSpace(note); note == "" {
		return Event{}, fmt.Errorf("%w: resolving %s needs a note saying what came back and how it was checked", ErrInvalid, it.ID)
	}
	if err := b.Ready(it.ID); err != nil {
		return Event{}, err
	}
	return b.commit(Event{Op: OpResolve, ID: it.ID, Note: note, Refs: cleanRefs(refs), By: by})
}

// Cancel closes an item that is not already cancelled. Items that depend
// on it stay as they are; Ready names the cancelled dep. Owners stay until
// their assignments end (Unassign): stopping them is the caller's call.
func (b *Board) Cancel(by, id, reason string) (Event, error) {
	it, err := b.get(id)
	if err != nil {
		return Event{}, err
	}
	if it.State == Cancelled {
		return Event{}, fmt.Errorf("%w: %s is already cancelled", ErrState, it.ID)
	}
	if reason = strings.TrimSpace(reason); reason == "" {
		return Event{}, fmt.Errorf("%w: cancelling %s needs a reason", ErrInvalid, it.ID)
	}
	return b.commit(Event{Op: OpCancel, ID: it.ID, Note: reason, By: by})
}

// Reopen reopens a resolved or cancelled item, and with it every descendant
// (an item that depends on it, transitively) that is resolved or in
// progress, listed in Event.Reopened. Open and cancelled descendants and
// independent items are untouched. Reopened items lose their owners: their
// assignments worked on a premise now known to be wrong, and the caller
// cancels them.
func (b *Board) Reopen(by, id, reason string) (Event, error) {
	it, err := b.get(id)
	if err != nil {
		return Event{}, err
	}
	if it.State.Active() {
		return Event{}, fmt.Errorf("%w: %s is %s; only resolved or cancelled items can be reopened", ErrState, it.ID, it.State)
	}
	if reason = strings.TrimSpace(reason); reason == "" {
		return Event{}, fmt.Errorf("%w: reopening %s needs a reason (what premise was wrong)", ErrInvalid, it.ID)
	}
	var reopened []string
	for _, d := range b.descendants(it.ID) {
		if d.State == Resolved || d.State == InProgress {
			reopened = append(reopened, d.ID)
		}
	}
	return b.commit(Event{Op: OpReopen, ID: it.ID, Note: reason, By: by, Reopened: reopened})
}

// Assign adds an owner to an active item whose deps are all resolved; the
// item becomes in_progress. Several owners may work on one item.
func (b *Board) Assign(id, owner string) (Event, error) {
	if owner = strings.TrimSpace(owner); owner == "" {
		return Event{}, fmt.Errorf("%w: assign needs an owner", ErrInvalid)
	}
	if err := b.Ready(id); err != nil {
		return Event{}, err
	}
	it := b.item(canon(id))
	if slices.Contains(it.Owners, owner) {
		return Event{}, fmt.Errorf("%w: %s is already assigned to %s", ErrInvalid, owner, it.ID)
	}
	return b.commit(Event{Op: OpAssign, ID: it.ID, Owner: owner, By: "runtime"})
}

// Unassign removes an owner, in any state; an in_progress item left
// without owners becomes open.
func (b *Board) Unassign(id, owner string) (Event, error) {
	it, err := b.get(id)
	if err != nil {
		return Event{}, err
	}
	if !slices.Contains(it.Owners, owner) {
		return Event{}, fmt.Errorf("%w: %q is not assigned to %s (owners: %s)", ErrNotOwner, owner, it.ID, listOrNone(it.Owners))
	}
	return b.commit(Event{Op: OpUnassign, ID: it.ID, Owner: owner, By: "runtime"})
}

// Attach adds refs (a report, evidence, an artifact) to an item in any
// state. It never changes the state: a reported result is not a
// resolution (R-BOARD-5).
func (b *Board) Attach(id string, refs []string) (Event, error) {
	it, err := b.get(id)
	if err != nil {
		return Event{}, err
	}
	var add []string
	for _, r := range cleanRefs(refs) {
		if !slices.Contains(it.Refs, r) {
			add = append(add, r)
		}
	}
	if len(add) == 0 {
		return Event{}, fmt.Errorf("%w: no new refs to attach to %s", ErrInvalid, it.ID)
	}
	return b.commit(Event{Op: OpAttach, ID: it.ID, Refs: add, By: "runtime"})
}

func (b *Board) commit(e Event) (Event, error) {
	if err := b.Apply(b.seq+1, e); err != nil {
		return Event{}, fmt.Errorf("board: the board refused its own event (a bug): %w", err)
	}
	return e, nil
}

// get finds an item by a loosely written id.
func (b *Board) get(id string) (*Item, error) {
	c := canon(id)
	if it := b.item(c); it != nil {
		return it, nil
	}
	return nil, b.unknown([]string{c})
}

// active finds an item that must be open or in progress for verb.
func (b *Board) active(id, verb string) (*Item, error) {
	it, err := b.get(id)
	if err != nil {
		return nil, err
	}
	if !it.State.Active() {
		return nil, fmt.Errorf("%w: %s is %s; board_reopen it before you %s it", ErrState, it.ID, it.State, verb)
	}
	return it, nil
}

func (b *Board) unknown(ids []string) error {
	have := "the board is empty"
	switch n := len(b.items); n {
	case 0:
	case 1:
		have = "the board has only T1"
	default:
		have = fmt.Sprintf("the board has T1–%s", itemID(n))
	}
	return fmt.Errorf("%w %s; %s (board_view lists them)", ErrUnknownItem, strings.Join(ids, ", "), have)
}

// validDeps canonicalizes deps and refuses unknown and cancelled ones.
func (b *Board) validDeps(deps []string) ([]string, error) {
	var ds, unknown, cancelled []string
	for _, d := range deps {
		c := canon(d)
		switch it := b.item(c); {
		case it == nil:
			unknown = append(unknown, c)
		case it.State == Cancelled:
			cancelled = append(cancelled, c)
		default:
			ds = append(ds, c)
		}
	}
	if len(unknown) > 0 {
		return nil, b.unknown(slices.Compact(unknown))
	}
	if len(cancelled) > 0 {
		return nil, fmt.Errorf("%w: %s cancelled; depend on active or resolved items (board_reopen a cancelled one first)",
			ErrState, plural(sortIDs(cancelled), "is", "are"))
	}
	return sortIDs(ds), nil
}

func cleanRefs(refs []string) []string {
	var out []string
	for _, r := range refs {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// plural is "T2 is" or "T2, T3 are".
func plural(ids []string, one, many string) string {
	if len(ids) == 1 {
		return ids[0] + " " + one
	}
	return strings.Join(ids, ", ") + " " + many
}
