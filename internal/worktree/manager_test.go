package worktree

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/watch"
)

// Two Managers of one shared directory keep apart what they index and
// watch: closing one leaves the other's worktrees merging, and a closed
// Manager watches nothing.
func TestManagersKeepApart(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	write(t, filepath.Join(shared, "a/f"), "f")
	one, two := NewManager(nil), NewManager(nil)
	defer two.Close()
	w1 := open(t, one.Create, shared, t.TempDir(), "A1")
	w2 := open(t, two.Create, shared, t.TempDir(), "A2")
	if one.Watch() == two.Watch() || one.Watch().Lookup(shared) == nil || two.Watch().Lookup(shared) == nil {
		t.Fatal("the managers do not each watch the shared directory in a Set of their own")
	}
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	one.Close()
	if one.Watch().Lookup(shared) != nil {
		t.Fatal("a closed Manager's Set still has the shared tree")
	}
	write(t, filepath.Join(w2.Dir, "a/g"), "g")
	if rep, err := w2.Merge(); err != nil || len(rep.Applied) != 1 {
		t.Fatalf("the other Manager's worktree after the first closed: %+v, %v", rep, err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	two.Close()
	for _, m := range []*Manager{one, two} {
		if _, err := m.Watch().For(shared); !errors.Is(err, watch.ErrClosed) || m.Watch().Lookup(shared) != nil {
			t.Fatalf("a closed Manager's Set still watches: %v", err)
		}
	}
}
