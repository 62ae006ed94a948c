package board

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func TestEventJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		e    Event
		json string // substring the encoding must contain; "" for none
	}{
		{"add", Event{Op: OpAdd, ID: "T1", Title: ptr("t"), Objective: ptr("o"), Deps: []string{"T2"}, Group: "g", By: "lead"}, `"deps":["T2"]`},
		{"update keeps deps", Event{Op: OpUpdate, ID: "T1", Title: ptr("t")}, ""},
		{"update clears deps", Event{Op: OpUpdate, ID: "T1", Deps: []string{}}, `"deps":[]`},
		{"resolve", Event{Op: OpResolve, ID: "T1", Note: "n", Refs: []string{"a", "b"}, By: "user"}, `"refs":["a","b"]`},
		{"reopen", Event{Op: OpReopen, ID: "T1", Note: "why", Reopened: []string{"T2", "T3"}}, `"reopened":["T2","T3"]`},
		{"assign", Event{Op: OpAssign, ID: "T1", Owner: "a1", By: "runtime"}, `"owner":"a1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(tt.e)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.json) {
				t.Errorf("%s does not contain %s", data, tt.json)
			}
			for _, reserved := range []string{`"seq"`, `"time"`, `"type"`, `"agent"`} {
				if strings.Contains(string(data), reserved) {
					t.Errorf("%s uses the record's reserved field %s", data, reserved)
				}
			}
			var got Event
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.e) {
				t.Errorf("round trip: got %+v, want %+v", got, tt.e)
			}
		})
	}
}

func TestApplyRefusesInconsistentEvents(t *testing.T) {
	tests := []struct {
		name  string
		seq   int64
		e     Event
		parts string
	}{
		{"seq gap", 5, Event{Op: OpAdd, ID: "T4", Title: ptr("x")}, "seq 5 after 3"},
		{"seq repeat", 3, Event{Op: OpAdd, ID: "T4", Title: ptr("x")}, "seq 3 after 3"},
		{"unknown op", 4, Event{Op: "delete", ID: "T1"}, `unknown op "delete"`},
		{"add reusing an id", 4, Event{Op: OpAdd, ID: "T2"}, "next id is T4"},
		{"add skipping an id", 4, Event{Op: OpAdd, ID: "T5"}, "next id is T4"},
		{"unknown target", 4, Event{Op: OpResolve, ID: "T9"}, `unknown item "T9"`},
		{"loose id", 4, Event{Op: OpResolve, ID: "t1"}, `unknown item "t1"`},
		{"unknown dep", 4, Event{Op: OpUpdate, ID: "T1", Deps: []string{"T7"}}, `unknown item "T7"`},
		{"cycle", 4, Event{Op: OpUpdate, ID: "T1", Deps: []string{"T3"}}, "T1 → T3 → T2 → T1"},
		{"unknown reopened", 4, Event{Op: OpReopen, ID: "T1", Reopened: []string{"T8"}}, `"T8"`},
		{"no owner", 4, Event{Op: OpAssign, ID: "T1"}, "without an owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Board{}
			add(t, b)
			add(t, b, "T1")
			add(t, b, "T2")
			before, _ := json.Marshal(b.Items())
			err := b.Apply(tt.seq, tt.e)
			wantErr(t, err, ErrEvent, tt.parts)
			after, _ := json.Marshal(b.Items())
			if !bytes.Equal(before, after) || b.Seq() != 3 {
				t.Error("a refused event changed the board")
			}
		})
	}
}

// TestApplySkipsPolicy: the fold replays what was recorded even where the
// commands would refuse it now (here, resolving before the deps).
func TestApplySkipsPolicy(t *testing.T) {
	b, err := Fold([]Event{
		{Op: OpAdd, ID: "T1", Title: ptr("a")},
		{Op: OpAdd, ID: "T2", Title: ptr("b"), Deps: []string{"T1"}},
		{Op: OpResolve, ID: "T2", Note: "by hand"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := state(t, b, "T2"); s != Resolved {
		t.Errorf("T2 is %s, want resolved", s)
	}
}

// randomCommands drives b with n random commands, valid and invalid, and
// returns the events of those that succeeded.
func randomCommands(t *testing.T, b *Board, r *rand.Rand, n int, ops map[string]int) []Event {
	t.Helper()
	id := func() string { return fmt.Sprintf("T%d", 1+r.IntN(b.Len()+2)) }
	ids := func() []string {
		var out []string
		for range r.IntN(3) {
			out = append(out, id())
		}
		return out
	}
	owner := func() string { return fmt.Sprintf("a%d", r.IntN(3)) }
	var events []Event
	for range n {
		var e Event
		var err error
		switch k := r.IntN(10); {
		case k < 3 || b.Len() == 0:
			e, err = b.Add("lead", "item", "objective", ids(), []string{"", "g1"}[r.IntN(2)])
		case k == 3:
			deps := ids()
			e, err = b.Update("lead", id(), ptr("retitled"), nil, &deps)
		case k == 4:
			e, err = b.Resolve("lead", id(), "done", ids())
		case k == 5:
			e, err = b.Cancel("user", id(), "moot")
		case k == 6:
			e, err = b.Reopen("lead", id(), "premise wrong")
		case k == 7:
			e, err = b.Assign(id(), owner())
		case k == 8:
			e, err = b.Unassign(id(), owner())
		default:
			e, err = b.Attach(id(), []string{fmt.Sprintf("ref%d", r.IntN(5))})
		}
		if err != nil {
			if !errors.Is(err, ErrUnknownItem) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrCycle) &&
				!errors.Is(err, ErrNotReady) && !errors.Is(err, ErrState) && !errors.Is(err, ErrNotOwner) {
				t.Fatalf("refusal without a sentinel: %v", err)
			}
			continue
		}
		ops[e.Op]++
		events = append(events, e)
	}
	return events
}

// checkInvariants asserts what holds on every board.
func checkInvariants(t *testing.T, b *Board) {
	t.Helper()
	for _, it := range b.Items() {
		if cyc := b.cycle(it.ID, it.Deps); cyc != nil {
			t.Fatalf("cycle on the board: %v", cyc)
		}
		if it.State.Active() && (it.State == InProgress) != (len(it.Owners) > 0) {
			t.Fatalf("%s is %s with owners %v", it.ID, it.State, it.Owners)
		}
	}
}

func TestFoldReproducesCommands(t *testing.T) {
	ops := map[string]int{}
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			live := &Board{}
			events := randomCommands(t, live, rand.New(rand.NewPCG(seed, 7)), 300, ops)
			checkInvariants(t, live)
			recorded := make([]Event, len(events))
			for i, e := range events { // as the record stores and reads them
				data, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(data, &recorded[i]); err != nil {
					t.Fatal(err)
				}
			}
			folded, err := Fold(recorded)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(live, folded) {
				t.Fatalf("the fold of %d events differs from the live board:\nlive:   %+v\nfolded: %+v", len(events), live.Items(), folded.Items())
			}
		})
	}
	for _, op := range []string{OpAdd, OpUpdate, OpResolve, OpCancel, OpReopen, OpAssign, OpUnassign, OpAttach} {
		if ops[op] == 0 {
			t.Errorf("the random commands never produced a %s event; the property does not cover it", op)
		}
	}
}

// FuzzApply feeds arbitrary event lines to Apply: it never panics, a
// refused event changes nothing, and the accepted events fold to the same
// board again.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"op":"add","id":"T1","title":"a"}
{"op":"add","id":"T2","title":"b","deps":["T1"]}
{"op":"update","id":"T1","deps":["T2"]}
{"op":"assign","id":"T2","owner":"a1"}
{"op":"reopen","id":"T1","reopened":["T2"]}
{"op":"unassign","id":"T2","owner":"a1"}`))
	f.Add([]byte(`{"op":"add","id":"T1"}
{"op":"update","id":"T1","deps":["T1"]}
{"op":"attach","id":"T1","refs":["x","x"]}
{"op":"resolve","id":"T99999999999"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &Board{}
		var accepted []Event
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			before, seq := b.Items(), b.Seq()
			if err := b.Apply(b.Seq()+1, e); err != nil {
				if !errors.Is(err, ErrEvent) || b.Seq() != seq || !reflect.DeepEqual(before, b.Items()) {
					t.Fatalf("refused event %+v: %v, and the board changed", e, err)
				}
				continue
			}
			accepted = append(accepted, e)
		}
		for _, it := range b.Items() {
			if cyc := b.cycle(it.ID, it.Deps); cyc != nil {
				t.Fatalf("cycle on the board: %v", cyc)
			}
			if err := b.RenderItem(&bytes.Buffer{}, it.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Render(&bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		again, err := Fold(accepted)
		if err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("refold: %v", err)
		}
	})
}

// Fold replays events (with seqs 1, 2, …) onto a new board.
func Fold(events []Event) (*Board, error) {
	b := &Board{}
	for i, e := range events {
		if err := b.Apply(int64(i+1), e); err != nil {
			return nil, fmt.Errorf("board event %d (%s %s): %w", i+1, e.Op, e.ID, err)
		}
	}
	return b, nil
}
