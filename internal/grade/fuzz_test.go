package grade

import (
	"encoding/json"
	"testing"
)

// A grader's tool-call arguments are outside input: whatever they are,
// checking them never panics, and an accepted answer bands exactly the
// items asked, 0–2, citing only visible seqs.
func FuzzBandAnswer(f *testing.F) {
	f.Add(`{"items":[{"item":"delivery.1","band":2,"cites":[2],"rationale":"x"}]}`)
	f.Add(`{"items":[{"item":"delivery.1","band":3,"cites":[]}]}`)
	f.Add(`{"items":null}`)
	f.Add(`[1,2]`)
	v := View{Visible: map[int64]bool{2: true, 3: true}}
	want := []string{"delivery.1"}
	f.Fuzz(func(t *testing.T, args string) {
		var a bandAnswer
		if json.Unmarshal([]byte(args), &a) != nil {
			return
		}
		if a.check(v, want, false) != nil {
			return
		}
		if len(a.Items) != 1 || a.Items[0].Item != "delivery.1" || a.Items[0].Band < 0 || a.Items[0].Band > 2 {
			t.Fatalf("accepted %s", args)
		}
		for _, c := range a.Items[0].Cites {
			if !v.Visible[c] {
				t.Fatalf("accepted an invisible cite: %s", args)
			}
		}
	})
}
