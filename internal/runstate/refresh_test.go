package runstate_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// TestRefreshIsLoad: after events are appended, Refresh of an earlier Load
// gives what a fresh Load gives, also after a torn tail was completed and
// when nothing was appended.
func TestRefreshIsLoad(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Tools: []string{"bash"}})
	b.add(record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Usage: usage(100, 10)})
	if err := b.log.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := runstate.Load(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	same := func(when string) {
		t.Helper()
		if err := st.Refresh(); err != nil {
			t.Fatalf("%s: refresh: %v", when, err)
		}
		want, err := runstate.Load(b.dir)
		if err != nil {
			t.Fatalf("%s: load: %v", when, err)
		}
		if st.Events != want.Events || st.TornTail != want.TornTail || !reflect.DeepEqual(st.State, want.State) ||
			!reflect.DeepEqual(st.Skipped, want.Skipped) {
			t.Fatalf("%s: refreshed %d events (torn %v, seq %d, usage %+v), a fresh load %d (torn %v, seq %d, usage %+v)",
				when, st.Events, st.TornTail, st.Seq, st.Usage, want.Events, want.TornTail, want.Seq, want.Usage)
		}
	}
	same("nothing appended")

	b.add(record.TypeModelResponse, "verifier", record.ModelResponse{Turn: 1, Usage: usage(30, 3)})
	b.add("from_the_future", "", map[string]string{"x": "y"})
	b.add(record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "completed"})
	b.log.Close()
	same("three events appended")
	if st.Finished == nil || st.Usage.TotalTokens != 143 || len(st.Skipped) != 1 {
		t.Fatalf("refreshed state: finished %v, usage %+v, skipped %v", st.Finished, st.Usage, st.Skipped)
	}

	// A torn tail, then its completion: the refresh reads it all again.
	events := filepath.Join(b.dir, record.EventsFile)
	f, err := os.OpenFile(events, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(`{"seq":6,"time":"2026-01-01T00:01:00Z","type":"warning","code":"x",`)
	same("a torn tail")
	if !st.TornTail {
		t.Fatal("the torn tail was not seen")
	}
	f.WriteString(`"message":"late"}` + "\n")
	same("the torn line completed")
	if st.TornTail || st.Seq != 6 {
		t.Fatalf("after completion: torn %v, seq %d", st.TornTail, st.Seq)
	}
}

// A record replaced by a shorter one (another run in the same directory)
// is read again whole, not taken as "nothing appended".
func TestRefreshOfAReplacedRecord(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "first", Objective: "a long objective that makes the first record the longer"})
	b.add(record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Usage: usage(100, 10)})
	b.log.Close()
	st, err := runstate.Load(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(b.dir, record.EventsFile))
	os.Remove(filepath.Join(b.dir, record.HeadFile))
	l, err := record.Create(b.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "second"})
	l.Close()
	if err := st.Refresh(); err != nil {
		t.Fatal(err)
	}
	if st.RunID != "second" || st.Seq != 1 {
		t.Fatalf("after the record was replaced: run %q at seq %d, want second at 1", st.RunID, st.Seq)
	}
}
