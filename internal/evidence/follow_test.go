package evidence

import (
	"fmt"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// A replay's calls of one turn end in another order than the original's:
// with Follow each text still gets its original id; a text the original
// never had is not held up.
func TestFollowGivesTheOriginalIDs(t *testing.T) {
	item := func(i int) Item {
		return Item{Kind: record.EvidenceFile, Source: fmt.Sprintf("/inputs/f%d.txt", i), Span: record.Span{From: 1, To: 1}}
	}
	text := func(i int) string { return fmt.Sprintf("line of file %d", i) }
	orig := New(nil, nil)
	for i := range 6 {
		if _, _, err := orig.Add("main", item(i), text(i)); err != nil {
			t.Fatal(err)
		}
	}
	replay := New(nil, nil)
	replay.Follow(orig.All())
	if it, _, _ := replay.Add("main", item(99), "new in the replay"); it.ID != "E1" {
		t.Fatalf("a text the original never had: %s, want E1 at once", it.ID)
	}
	replay = New(nil, nil)
	replay.Follow(orig.All())
	var wg sync.WaitGroup
	got := make([]string, 6)
	for i := 5; i >= 0; i-- { // the last first: each waits for the ones before it
		wg.Go(func() {
			it, _, err := replay.Add("main", item(i), text(i))
			if err != nil {
				t.Error(err)
			}
			got[i] = it.ID
		})
	}
	wg.Wait()
	for i, id := range got {
		if want := fmt.Sprintf("E%d", i+1); id != want {
			t.Errorf("file %d got %s in the replay, %s in the original", i, id, want)
		}
	}
}
