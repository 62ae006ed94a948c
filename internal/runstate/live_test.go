package runstate_test

import (
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// A live state sees every event appended before a Read, from the log in
// memory: the claims a report just stated are in the ledger at once.
func TestLiveFollowsTheLog(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Tools: []string{"dispatch"}})
	live, err := runstate.NewLive(b.log)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	claimsNow := func() (n int, seq int64) {
		t.Helper()
		if err := live.Read(func(st *runstate.State) { n, seq = len(st.Claims.Ledger().Claims), st.Seq }); err != nil {
			t.Fatal(err)
		}
		return n, seq
	}
	if n, seq := claimsNow(); n != 0 || seq != 1 {
		t.Fatalf("%d claims at seq %d, want none at 1", n, seq)
	}
	b.add(record.TypeClaim, "A1", record.Claim{ID: "K1", Text: "x is 1", StatedBy: "A1"})
	b.add(record.TypeClaim, "A2", record.Claim{ID: "K2", Text: "x is 2", StatedBy: "A2"})
	if n, seq := claimsNow(); n != 2 || seq != 3 {
		t.Fatalf("%d claims at seq %d, want 2 at 3", n, seq)
	}
	// A refused event is the error of this Read and every later one.
	b.add(record.TypeClaim, "A1", map[string]any{"id": 7})
	if err := live.Read(func(*runstate.State) { t.Error("fn called on a refused event") }); err == nil {
		t.Fatal("a payload that does not decode was folded")
	}
}
