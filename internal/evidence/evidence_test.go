package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
)

func newLog(t *testing.T) *record.Log {
	t.Helper()
	log, err := record.Create(filepath.Join(t.TempDir(), "run"), func() time.Time { return time.Unix(1700000000, 0) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return log
}

func TestRegistryIDsDedupAndRecord(t *testing.T) {
	log := newLog(t)
	q := New(log, nil)
	a, reused, err := q.Add("main", Item{Kind: record.EvidenceSearch, Source: "/inputs/corpus/a.md", Span: record.Span{From: 1, To: 3}}, "alpha\nbeta\ngamma")
	if err != nil || reused || a.ID != "E1" {
		t.Fatalf("first: %+v %v %v", a, reused, err)
	}
	b, _, _ := q.Add("main", Item{Kind: record.EvidenceFile, Source: "/inputs/b.txt", Span: record.Span{From: 1, To: 1}}, "b")
	again, reused, _ := q.Add("sub", Item{Kind: record.EvidenceFetch, Source: "/inputs/corpus/a.md", Span: record.Span{From: 1, To: 3}}, "alpha\nbeta\ngamma")
	if b.ID != "E2" || again.ID != "E1" || !reused {
		t.Fatalf("ids %s %s (reused %v), want E2 and E1 again", b.ID, again.ID, reused)
	}
	changed, _, _ := q.Add("main", Item{Kind: record.EvidenceSearch, Source: "/inputs/corpus/a.md", Span: record.Span{From: 1, To: 3}}, "alpha\nbeta\nGAMMA")
	if changed.ID != "E3" {
		t.Fatalf("a changed text kept id %s; want a new one", changed.ID)
	}
	big := strings.Repeat("long evidence line\n", 1000) // > InlineLimit: a blob
	c, _, err := q.Add("main", Item{Kind: record.EvidenceFetch, Source: "https://example.com/", Span: record.Span{From: 1, To: 1000}}, big)
	if err != nil || c.TextRef == "" || c.Text != "" {
		t.Fatalf("big text: %+v %v", c, err)
	}
	log.Sync()

	// The fold of the record is the same Q, texts included.
	r, err := FromRecord(log.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 4 {
		t.Fatalf("folded %d ids, want 4", r.Len())
	}
	for id, want := range map[string]string{"E1": "alpha\nbeta\ngamma", "E2": "b", "E4": big} {
		if got, err := r.Text(id); err != nil || got != want {
			t.Errorf("%s: text %q… err %v", id, clipT(got), err)
		}
	}
	if _, err := r.Text("E999"); !errors.Is(err, ErrUnknown) {
		t.Errorf("E999: %v", err)
	}
	// A restored Q continues the numbering and keeps deduplicating.
	next, reused, _ := r.Add("main", Item{Kind: record.EvidenceFile, Source: "/inputs/b.txt", Span: record.Span{From: 1, To: 1}}, "b")
	if next.ID != "E2" || !reused {
		t.Errorf("restored dedup: %s %v", next.ID, reused)
	}
	n, _, _ := r.Add("main", Item{Kind: record.EvidenceFile, Source: "/inputs/c.txt", Span: record.Span{From: 1, To: 1}}, "c")
	if n.ID != "E5" {
		t.Errorf("restored next id %s, want E5", n.ID)
	}
}

func TestBlobTamperDetected(t *testing.T) {
	log := newLog(t)
	q := New(log, nil)
	it, _, _ := q.Add("main", Item{Kind: record.EvidenceFetch, Source: "x", Span: record.Span{From: 1, To: 1}}, strings.Repeat("y", InlineLimit+1))
	log.Sync()
	p, _ := record.BlobPath(log.Dir(), it.TextRef)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("forged"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := FromRecord(log.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Text(it.ID); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("forged blob: %v", err)
	}
}

func TestFoldRefusesOutOfSequence(t *testing.T) {
	raw := `{"seq":1,"time":"2026-01-01T00:00:00Z","type":"evidence","id":"E2","kind":"file","source":"x","span":{"from":1,"to":1},"sha256":"","retrieved":"2026-01-01T00:00:00Z","bytes":0}` + "\n"
	c, err := record.Parse(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Fold(c.Events); err == nil {
		t.Fatal("an id out of sequence folded without error")
	}
}

func TestProducers(t *testing.T) {
	log := newLog(t)
	p := NewProducers(log)
	log.Append(record.TypeToolCall, "main", record.ToolCall{CallID: "c1", Name: "bash"})
	log.Append(record.TypeFileDelta, "main", record.FileDelta{CallID: "c1", Path: "/workspace/out.csv"})
	log.Append(record.TypeToolCall, "main", record.ToolCall{CallID: "c2", Name: "write_file"})
	log.Append(record.TypeFileDelta, "main", record.FileDelta{CallID: "c2", Path: "/workspace/notes.md"})
	if !p.ByCommand("/workspace/out.csv") || p.ByCommand("/workspace/notes.md") || p.ByCommand("/workspace/none") {
		t.Fatal("producers wrong")
	}
	// A later write by the agent itself ends the file's standing as evidence.
	log.Append(record.TypeToolCall, "main", record.ToolCall{CallID: "c3", Name: "edit_file"})
	log.Append(record.TypeFileDelta, "main", record.FileDelta{CallID: "c3", Path: "/workspace/out.csv"})
	if p.ByCommand("/workspace/out.csv") {
		t.Fatal("an edited command output still counts as produced by the command")
	}
}

func clipT(s string) string { return s[:min(len(s), 30)] }

func TestRegistryConcurrentAgents(t *testing.T) {
	log := newLog(t)
	q := New(log, nil)
	done := make(chan struct{})
	for a := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 100 {
				q.Add("agent", Item{Kind: record.EvidenceFile, Source: "/inputs/f", Span: record.Span{From: a*1000 + i, To: a*1000 + i}}, "x")
			}
		}()
	}
	for range 8 {
		<-done
	}
	log.Sync()
	c, _ := record.Read(log.Dir())
	items, err := Fold(c.Events) // ids in record order are E1, E2, … with no gap
	if err != nil || len(items) != 800 || q.Len() != 800 {
		t.Fatalf("%d folded, %d in Q: %v", len(items), q.Len(), err)
	}
}
