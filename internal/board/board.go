// Package board is the Task Board of an Agent Team run (SPEC §6, R-BOARD):
// the lead's plan as items with dependencies, kept outside any model context
// so that it survives compaction, replay and resume.
//
// Guarantees:
//   - the board's state is a left fold of its events: Apply(seq, e) with
//     seq = 1, 2, 3, … in the order the events were recorded. The same events
//     give the same board, field for field: no clock, no randomness, no map
//     iteration. The run's projection (runstate) folds it for every reader;
//   - ids are T1, T2, … in order of addition; an id is never reused or
//     renumbered (items are cancelled, never deleted);
//   - the dependency graph is acyclic and names only existing items;
//   - the command methods (Add, Update, Resolve, Cancel, Reopen, Assign,
//     Unassign, Attach) enforce policy: unknown ids, cycles, deps on cancelled
//     items, resolving or assigning before the deps are resolved. They return
//     the Event they applied, for the caller to record. A refusal changes
//     nothing and says what to do instead;
//   - Apply checks consistency only: a known op, the next seq, an existing
//     target, the next id for add, deps that exist and make no cycle. It does
//     not re-judge policy (state transitions, readiness), so a record replays
//     as it was written. An event Apply refuses leaves the board unchanged;
//   - an active item is in_progress exactly when it has owners;
//   - a reported result never changes state: Attach adds refs only, and
//     resolved is the lead's judgement (R-BOARD-5). Reopen reopens the item
//     and only those of its descendants that are resolved or in progress,
//     never independent items (R-BOARD-4).
//
// A Board is not safe for concurrent use: the caller serializes each command
// with its recording, so that the record's order is the order of application.
package board

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// State is an item's resolution state.
type State string

// The states. Resolved and cancelled items are closed; the others are active.
const (
	Open       State = "open"
	InProgress State = "in_progress"
	Resolved   State = "resolved"
	Cancelled  State = "cancelled"
)

// Active reports whether s is open or in progress.
func (s State) Active() bool { return s == Open || s == InProgress }

// Ops, the Event kinds.
const (
	OpAdd      = "add"
	OpUpdate   = "update"
	OpResolve  = "resolve"
	OpCancel   = "cancel"
	OpReopen   = "reopen"
	OpAssign   = "assign"
	OpUnassign = "unassign"
	OpAttach   = "attach"
)

// Errors. Each refusal wraps one of these with what is wrong and what to do.
var (
	ErrUnknownItem = errors.New("board: unknown item")
	ErrInvalid     = errors.New("board: invalid request")
	ErrCycle       = errors.New("board: dependency cycle")
	ErrNotReady    = errors.New("board: dependencies not resolved")
	ErrState       = errors.New("board: wrong state")
	ErrNotOwner    = errors.New("board: not an owner")
	ErrEvent       = errors.New("board: inconsistent event") // Apply refused an event
)

// Item is one unit of the plan.
type Item struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Objective string   `json:"objective"`
	Owners    []string `json:"owners,omitempty"` // agents (assignments) working on it
	Deps      []string `json:"deps,omitempty"`   // in id order
	Group     string   `json:"group,omitempty"`
	Refs      []string `json:"refs,omitempty"` // evidence, artifact and report refs
	State     State    `json:"state"`
	Note      string   `json:"note,omitempty"` // resolution note, or cancel/reopen reason
	History   []Change `json:"history"`
}

// Change is one mutation of an item. Seq is the board seq of its event.
type Change struct {
	Seq    int64  `json:"seq"`
	Op     string `json:"op"`
	Detail string `json:"detail,omitempty"`
	By     string `json:"by,omitempty"`
}

// Event is one board mutation: the payload of the record's board events
// (record.Board, where its fields are described).
type Event = record.Board

// Board is the task board. The zero value is an empty board.
type Board struct {
	items []*Item // items[i] has id T(i+1)
	seq   int64   // seq of the last event applied
}

// Seq is the seq of the last event applied (0 for an empty board); the next
// event must be applied with Seq()+1.
func (b *Board) Seq() int64 { return b.seq }

// Apply folds one event into the board. seq is the event's position among
// the run's board events and must be Seq()+1, so a replay that skips or
// repeats an event fails instead of folding to another board.
func (b *Board) Apply(seq int64, e Event) error {
	if seq != b.seq+1 {
		return fmt.Errorf("%w: seq %d after %d; apply board events in order, each once", ErrEvent, seq, b.seq)
	}
	if err := b.check(e); err != nil {
		return err
	}
	b.seq = seq
	b.apply(seq, e)
	return nil
}

// check is Apply's consistency check; it changes nothing.
func (b *Board) check(e Event) error {
	if e.Op == OpAdd {
		if want := itemID(len(b.items) + 1); e.ID != want {
			return fmt.Errorf("%w: add of %q, but the next id is %s", ErrEvent, e.ID, want)
		}
		return b.checkDeps(e.Deps)
	}
	switch e.Op {
	case OpUpdate, OpResolve, OpCancel, OpReopen, OpAssign, OpUnassign, OpAttach:
	default:
		return fmt.Errorf("%w: unknown op %q", ErrEvent, e.Op)
	}
	if b.item(e.ID) == nil {
		return fmt.Errorf("%w: %s of unknown item %q", ErrEvent, e.Op, e.ID)
	}
	switch e.Op {
	case OpUpdate:
		if err := b.checkDeps(e.Deps); err != nil {
			return err
		}
		if cyc := b.cycle(e.ID, e.Deps); cyc != nil {
			return fmt.Errorf("%w: deps make the cycle %s", ErrEvent, strings.Join(cyc, " → "))
		}
	case OpReopen:
		for _, id := range e.Reopened {
			if b.item(id) == nil {
				return fmt.Errorf("%w: reopen of unknown item %q", ErrEvent, id)
			}
		}
	case OpAssign, OpUnassign:
		if e.Owner == "" {
			return fmt.Errorf("%w: %s without an owner", ErrEvent, e.Op)
		}
	}
	return nil
}

func (b *Board) checkDeps(deps []string) error {
	for _, d := range deps {
		if b.item(d) == nil {
			return fmt.Errorf("%w: dep on unknown item %q", ErrEvent, d)
		}
	}
	return nil
}

// apply mutates the board by a checked event.
func (b *Board) apply(seq int64, e Event) {
	ch := Change{Seq: seq, Op: e.Op, By: e.By}
	if e.Op == OpAdd {
		it := &Item{ID: e.ID, Title: deref(e.Title), Objective: deref(e.Objective),
			Deps: sortIDs(e.Deps), Group: e.Group, State: Open}
		if len(it.Deps) > 0 {
			ch.Detail = "deps " + strings.Join(it.Deps, ", ")
		}
		it.History = []Change{ch}
		b.items = append(b.items, it)
		return
	}
	it := b.item(e.ID)
	var detail []string
	switch e.Op {
	case OpUpdate:
		if e.Title != nil {
			it.Title = *e.Title
			detail = append(detail, fmt.Sprintf("title %q", it.Title))
		}
		if e.Objective != nil {
			it.Objective = *e.Objective
			detail = append(detail, "objective revised")
		}
		if e.Deps != nil {
			deps := sortIDs(e.Deps)
			detail = append(detail, fmt.Sprintf("deps %s → %s", listOrNone(it.Deps), listOrNone(deps)))
			it.Deps = deps
		}
	case OpResolve:
		it.State, it.Note = Resolved, e.Note
		it.Refs = addRefs(it.Refs, e.Refs)
		detail = append(detail, e.Note)
	case OpCancel:
		it.State, it.Note = Cancelled, e.Note
		detail = append(detail, e.Note)
	case OpReopen:
		it.State, it.Note, it.Owners = Open, e.Note, nil
		detail = append(detail, e.Note)
		if len(e.Reopened) > 0 {
			detail = append(detail, "also reopened "+strings.Join(e.Reopened, ", "))
		}
		for _, id := range e.Reopened {
			d := b.item(id)
			d.State, d.Owners = Open, nil
			d.Note = "reopened with " + e.ID + ": " + e.Note
			d.History = append(d.History, Change{Seq: seq, Op: OpReopen, Detail: d.Note, By: e.By})
		}
	case OpAssign:
		if !slices.Contains(it.Owners, e.Owner) {
			it.Owners = append(it.Owners, e.Owner)
		}
		if it.State == Open {
			it.State = InProgress
		}
		detail = append(detail, e.Owner)
	case OpUnassign:
		if i := slices.Index(it.Owners, e.Owner); i >= 0 {
			it.Owners = slices.Delete(it.Owners, i, i+1)
		}
		if len(it.Owners) == 0 {
			it.Owners = nil
			if it.State == InProgress {
				it.State = Open
			}
		}
		detail = append(detail, e.Owner)
	case OpAttach:
		it.Refs = addRefs(it.Refs, e.Refs)
		detail = append(detail, strings.Join(e.Refs, ", "))
	}
	ch.Detail = strings.Join(detail, "; ")
	it.History = append(it.History, ch)
}

// item returns the item with canonical id, or nil.
func (b *Board) item(id string) *Item {
	if n := idNum(id); n > 0 && n <= len(b.items) {
		return b.items[n-1]
	}
	return nil
}

func itemID(n int) string { return "T" + strconv.Itoa(n) }

// idNum is n for a canonical id "Tn" (n ≥ 1, no leading zero), else 0.
func idNum(id string) int {
	if len(id) < 2 || len(id) > 10 || id[0] != 'T' || id[1] == '0' {
		return 0
	}
	n := 0
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// canon turns what a model may write for an id ("t3", "3", " T3 ") into
// the canonical form; anything else is returned trimmed, to be refused.
func canon(id string) string {
	s := strings.TrimSpace(id)
	digits := strings.TrimLeft(s, "tT")
	if len(s)-len(digits) > 1 || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return s
	}
	if digits = strings.TrimLeft(digits, "0"); digits == "" {
		return s
	}
	return "T" + digits
}

// sortIDs returns ids deduplicated in id order, or nil when there are none.
func sortIDs(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b string) int { return idNum(a) - idNum(b) })
	return slices.Compact(out)
}

// addRefs appends the refs not yet in have.
func addRefs(have, refs []string) []string {
	for _, r := range refs {
		if !slices.Contains(have, r) {
			have = append(have, r)
		}
	}
	return have
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func listOrNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
