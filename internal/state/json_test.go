package state

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A state read back from its JSON is the state it was, and advances as it
// would have: serialized after any event of the scenario and fed the rest,
// it is the fold of every event.
func TestJSONRoundTrip(t *testing.T) {
	evs, _ := scenario(t)
	want, err := FromRecord(evs)
	if err != nil {
		t.Fatal(err)
	}
	for cut := range len(evs) + 1 {
		s, err := FromRecord(evs[:cut])
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back := New()
		if err := json.Unmarshal(raw, back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("cut %d: the state read back differs from the state written", cut)
		}
		for _, e := range evs[cut:] {
			if err := back.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("cut %d: the state read back and advanced differs from the whole fold", cut)
		}
	}
}
