package board

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// add appends an item with deps and returns its id.
func add(t *testing.T, b *Board, deps ...string) string {
	t.Helper()
	e, err := b.Add("lead", "item", "do the thing", deps, "")
	if err != nil {
		t.Fatalf("add with deps %v: %v", deps, err)
	}
	return e.ID
}

func resolve(t *testing.T, b *Board, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := b.Resolve("lead", id, "done", nil); err != nil {
			t.Fatalf("resolve %s: %v", id, err)
		}
	}
}

func state(t *testing.T, b *Board, id string) State {
	t.Helper()
	it, err := b.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return it.State
}

// wantErr checks err against a sentinel and substrings of its message.
func wantErr(t *testing.T, err, sentinel error, parts ...string) {
	t.Helper()
	if sentinel == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestIDsStableAndIncreasing(t *testing.T) {
	b := &Board{}
	for i, want := range []string{"T1", "T2", "T3"} {
		if got := add(t, b); got != want {
			t.Fatalf("add %d: id %s, want %s", i, got, want)
		}
	}
	if _, err := b.Cancel("lead", "T3", "not needed"); err != nil {
		t.Fatal(err)
	}
	if got := add(t, b); got != "T4" {
		t.Fatalf("after a cancel the next id is %s, want T4 (ids are never reused)", got)
	}
	for _, loose := range []string{"t2", "2", " T2 ", "T02"} {
		if it, err := b.Get(loose); err != nil || it.ID != "T2" {
			t.Errorf("Get(%q) = %v, %v; want T2", loose, it.ID, err)
		}
	}
	for _, bad := range []string{"T0", "T5", "X1", "", "TT1", "T-1"} {
		_, err := b.Get(bad)
		wantErr(t, err, ErrUnknownItem, "T1–T4")
	}
}

func TestAddDeps(t *testing.T) {
	tests := []struct {
		name     string
		deps     []string
		sentinel error
		parts    []string
		want     []string
	}{
		{"none", nil, nil, nil, nil},
		{"sorted and deduplicated", []string{"T2", "t1", "T2"}, nil, nil, []string{"T1", "T2"}},
		{"unknown named", []string{"T1", "T9", "T12"}, ErrUnknownItem, []string{"T9, T12", "board_view"}, nil},
		{"cancelled refused", []string{"T1", "T3"}, ErrState, []string{"T3 is cancelled"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Board{}
			add(t, b)
			add(t, b)
			add(t, b)
			if _, err := b.Cancel("lead", "T3", "wrong approach"); err != nil {
				t.Fatal(err)
			}
			e, err := b.Add("lead", "t", "o", tt.deps, "")
			wantErr(t, err, tt.sentinel, tt.parts...)
			if err != nil {
				if b.Len() != 3 || b.Seq() != 4 {
					t.Errorf("a refused add changed the board: %d items, seq %d", b.Len(), b.Seq())
				}
				return
			}
			if !slices.Equal(e.Deps, tt.want) {
				t.Errorf("deps %v, want %v", e.Deps, tt.want)
			}
		})
	}
	b := &Board{}
	_, err := b.Add("lead", " ", "objective", nil, "")
	wantErr(t, err, ErrInvalid, "title")
}

func TestUpdate(t *testing.T) {
	// T1 ← T2 ← T3; T4 independent; T5 resolved.
	setup := func(t *testing.T) *Board {
		b := &Board{}
		add(t, b)
		add(t, b, "T1")
		add(t, b, "T2")
		add(t, b)
		add(t, b)
		resolve(t, b, "T5")
		return b
	}
	deps := func(ids ...string) *[]string { return &ids }
	title := "new title"
	tests := []struct {
		name     string
		id       string
		title    *string
		deps     *[]string
		sentinel error
		parts    []string
	}{
		{"direct cycle", "T2", nil, deps("T3"), ErrCycle, []string{"T2 → T3 → T2"}},
		{"transitive cycle", "T1", nil, deps("T4", "T3"), ErrCycle, []string{"T1 → T3 → T2 → T1", "drop the dep on T3"}},
		{"self", "T4", nil, deps("T4"), ErrCycle, []string{"T4 → T4"}},
		{"unknown dep", "T4", nil, deps("T7"), ErrUnknownItem, []string{"T7"}},
		{"closed item", "T5", &title, nil, ErrState, []string{"T5 is resolved", "board_reopen"}},
		{"nothing", "T4", nil, nil, ErrInvalid, []string{"nothing to update"}},
		{"forward dep is fine", "T1", nil, deps("T4"), nil, nil},
		{"clear deps", "T3", &title, deps(), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			before := b.Items()
			e, err := b.Update("lead", tt.id, tt.title, nil, tt.deps)
			wantErr(t, err, tt.sentinel, tt.parts...)
			if err != nil {
				if !equalItems(before, b.Items()) {
					t.Error("a refused update changed the board")
				}
				return
			}
			it, _ := b.Get(tt.id)
			if !slices.Equal(it.Deps, *tt.deps) || (tt.title != nil && it.Title != *tt.title) {
				t.Errorf("item after update: %+v (event %+v)", it, e)
			}
		})
	}
}

func TestReopenDescendantsOnly(t *testing.T) {
	// Diamond T1 ← T2, T3 ← T4, plus T5 under T4, and an independent
	// branch T6 ← T7.
	setup := func(t *testing.T) *Board {
		b := &Board{}
		add(t, b)
		add(t, b, "T1")
		add(t, b, "T1")
		add(t, b, "T2", "T3")
		add(t, b, "T4")
		add(t, b)
		add(t, b, "T6")
		resolve(t, b, "T1", "T2", "T3", "T4", "T5", "T6", "T7")
		return b
	}
	tests := []struct {
		name     string
		prep     func(t *testing.T, b *Board)
		id       string
		reopened []string
		open     []string // every item open afterwards; the rest keep their state
	}{
		{"root of the diamond", nil, "T1", []string{"T2", "T3", "T4", "T5"}, []string{"T1", "T2", "T3", "T4", "T5"}},
		{"one side of the diamond", nil, "T2", []string{"T4", "T5"}, []string{"T2", "T4", "T5"}},
		{"leaf", nil, "T5", nil, []string{"T5"}},
		{"independent branch", nil, "T6", []string{"T7"}, []string{"T6", "T7"}},
		{"in-progress descendant reopened, cancelled kept", func(t *testing.T, b *Board) {
			if _, err := b.Reopen("lead", "T4", "redo"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Assign("T4", "a1"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Cancel("lead", "T5", "dropped"); err != nil {
				t.Fatal(err)
			}
		}, "T3", []string{"T4"}, []string{"T3", "T4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			if tt.prep != nil {
				tt.prep(t, b)
			}
			before := b.Items()
			e, err := b.Reopen("user", tt.id, "premise was wrong")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.Reopened, tt.reopened) {
				t.Errorf("Reopened %v, want %v", e.Reopened, tt.reopened)
			}
			for i, it := range b.Items() {
				want := before[i].State
				if slices.Contains(tt.open, it.ID) {
					want = Open
				}
				if it.State != want || (want == Open && it.Owners != nil) {
					t.Errorf("%s is %s with owners %v, want %s without owners", it.ID, it.State, it.Owners, want)
				}
			}
		})
	}
	b := setup(t)
	_, err := b.Reopen("lead", "T1", "")
	wantErr(t, err, ErrInvalid, "reason")
	b.Reopen("lead", "T1", "again")
	_, err = b.Reopen("lead", "T1", "again")
	wantErr(t, err, ErrState, "T1 is open")
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		id, note string
		sentinel error
		parts    []string
	}{
		{"unresolved deps named", "T4", "ok", ErrNotReady, []string{"T4 waits on T2 (in_progress), T3 (open)"}},
		{"cancelled dep named", "T5", "ok", ErrNotReady, []string{"T6 (cancelled)", "board_update"}},
		{"note required", "T2", " ", ErrInvalid, []string{"note"}},
		{"already resolved", "T1", "again", ErrState, []string{"T1 is resolved"}},
		{"cancelled", "T6", "ok", ErrState, []string{"T6 is cancelled", "board_reopen"}},
		{"unknown", "T9", "ok", ErrUnknownItem, []string{"T9"}},
		{"ready", "T2", "found it", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Board{}
			add(t, b)                   // T1 resolved
			add(t, b, "T1")             // T2 in progress
			add(t, b)                   // T3 open
			add(t, b, "T1", "T2", "T3") // T4
			add(t, b)                   // T5, depends on T6 below
			add(t, b)                   // T6 cancelled
			resolve(t, b, "T1")
			if _, err := b.Assign("T2", "a1"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Update("lead", "T5", nil, nil, &[]string{"T6"}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Cancel("lead", "T6", "moot"); err != nil {
				t.Fatal(err)
			}
			_, err := b.Resolve("lead", tt.id, tt.note, []string{"r1", "r1", " "})
			wantErr(t, err, tt.sentinel, tt.parts...)
			if err == nil {
				it, _ := b.Get(tt.id)
				if it.State != Resolved || it.Note != tt.note || !slices.Equal(it.Refs, []string{"r1"}) {
					t.Errorf("resolved item: %+v", it)
				}
			}
		})
	}
}

func TestAssignments(t *testing.T) {
	b := &Board{}
	add(t, b)
	add(t, b, "T1")
	add(t, b)
	_, err := b.Assign("T2", "a1")
	wantErr(t, err, ErrNotReady, "T2 waits on T1 (open)")
	_, err = b.Assign("T1", "")
	wantErr(t, err, ErrInvalid, "owner")
	b.Cancel("lead", "T3", "moot")
	_, err = b.Assign("T3", "a1")
	wantErr(t, err, ErrState, "T3 is cancelled")

	steps := []struct {
		assign bool
		owner  string
		state  State
		owners []string
	}{
		{true, "a1", InProgress, []string{"a1"}},
		{true, "a2", InProgress, []string{"a1", "a2"}},
		{false, "a1", InProgress, []string{"a2"}},
		{false, "a2", Open, nil},
	}
	for _, s := range steps {
		var err error
		if s.assign {
			_, err = b.Assign("T1", s.owner)
		} else {
			_, err = b.Unassign("T1", s.owner)
		}
		if err != nil {
			t.Fatal(err)
		}
		it, _ := b.Get("T1")
		if it.State != s.state || !slices.Equal(it.Owners, s.owners) {
			t.Fatalf("after assign=%v %s: %s %v, want %s %v", s.assign, s.owner, it.State, it.Owners, s.state, s.owners)
		}
	}
	_, err = b.Unassign("T1", "a9")
	wantErr(t, err, ErrNotOwner, "a9", "T1")
	b.Assign("T1", "a1")
	_, err = b.Assign("T1", "a1")
	wantErr(t, err, ErrInvalid, "already assigned")
	resolve(t, b, "T1")
	if _, err := b.Unassign("T1", "a1"); err != nil || state(t, b, "T1") != Resolved {
		t.Fatalf("unassign from a resolved item: %v, state %s", err, state(t, b, "T1"))
	}
}

func TestUnlocked(t *testing.T) {
	b := &Board{}
	add(t, b)
	add(t, b)
	add(t, b, "T1", "T2")
	add(t, b, "T1")
	add(t, b, "T2")
	b.Cancel("lead", "T5", "moot")
	resolve(t, b, "T1")
	if got := b.Unlocked("T1"); !slices.Equal(got, []string{"T4"}) {
		t.Errorf("Unlocked(T1) = %v, want [T4]", got)
	}
	resolve(t, b, "T2")
	if got := b.Unlocked("T2"); !slices.Equal(got, []string{"T3"}) {
		t.Errorf("Unlocked(T2) = %v, want [T3] (T5 is cancelled)", got)
	}
	if got := b.Dependents("T2"); !slices.Equal(got, []string{"T3", "T5"}) {
		t.Errorf("Dependents(T2) = %v", got)
	}
	if c := b.Counts(); c != (Counts{Open: 2, Resolved: 2, Cancelled: 1}) {
		t.Errorf("Counts = %+v", c)
	}
	if got := len(b.Active()); got != 2 {
		t.Errorf("%d active items, want 2", got)
	}
}

func TestAttachNeverResolves(t *testing.T) {
	b := &Board{}
	add(t, b)
	b.Assign("T1", "a1")
	if _, err := b.Attach("T1", []string{"report:a1", "sha256:ab"}); err != nil {
		t.Fatal(err)
	}
	it, _ := b.Get("T1")
	if it.State != InProgress || len(it.Refs) != 2 {
		t.Errorf("after attach: %s with refs %v", it.State, it.Refs)
	}
	_, err := b.Attach("T1", []string{"report:a1"})
	wantErr(t, err, ErrInvalid, "no new refs")
}

func equalItems(a, b []Item) bool {
	return slices.EqualFunc(a, b, func(x, y Item) bool {
		return x.ID == y.ID && x.State == y.State && x.Title == y.Title &&
			slices.Equal(x.Deps, y.Deps) && len(x.History) == len(y.History)
	})
}
