package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// A view after the first reads none of the record again: the live state
// reads only what was appended since, and serves every view from itself.
func TestViewsReadTheRecordOnce(t *testing.T) {
	home := t.TempDir()
	dir := writeRun(t, home, "big", 5000)
	s := New(Config{Home: home})
	srv := httptest.NewServer(s)
	defer srv.Close()
	read := func() int64 {
		t.Helper()
		l := s.live.runs[dir]
		if l == nil {
			t.Fatal("no live state for the run")
		}
		return l.st.BytesRead
	}
	first := map[string][]byte{}
	for _, v := range views {
		first[v] = get(t, srv.URL+"/api/runs/big"+v)
	}
	size := fileSize(t, filepath.Join(dir, record.EventsFile))
	if got := read(); got != size {
		t.Fatalf("%d bytes of the record read by the first views, want the record once (%d)", got, size)
	}
	for _, v := range views {
		if again := get(t, srv.URL+"/api/runs/big"+v); !bytes.Equal(again, first[v]) {
			t.Errorf("view %q changed with the record unchanged", v)
		}
	}
	if got := read(); got != size {
		t.Errorf("%d bytes read after every view twice, want %d: a view re-read the record", got, size)
	}
}

// An event appended to a served run is in the next view, and only its
// line is read.
func TestViewsFollowTheRecord(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "runs", "r")
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Objective: "o"})
	s := New(Config{Home: home})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if body := get(t, srv.URL+"/api/runs/r/evidence"); !bytes.Equal(bytes.TrimSpace(body), []byte("[]")) {
		t.Fatalf("evidence of a run without any: %s", body)
	}
	l.Append(record.TypeEvidence, "main", record.Evidence{ID: "E1", Kind: "file", Source: "/inputs/a.csv", Text: "forty-two"})
	if body := get(t, srv.URL+"/api/runs/r/evidence"); !bytes.Contains(body, []byte("forty-two")) {
		t.Fatalf("the evidence appended is not served: %s", body)
	}
	if got, size := s.live.runs[dir].st.BytesRead, fileSize(t, filepath.Join(dir, record.EventsFile)); got != size {
		t.Errorf("%d bytes read in all, want each line once (%d)", got, size)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// Concurrent requests while the run appends share one live state safely
// (run with -race), and each sees a state no older than the record was
// when it asked.
func TestLiveStateUnderConcurrentRequests(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "runs", "r")
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Objective: "o"})
	srv := httptest.NewServer(New(Config{Home: home}))
	defer srv.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 50; i++ {
			l.Append(record.TypeEvidence, "main", record.Evidence{ID: "E" + strconv.Itoa(i), Kind: "file", Source: "/inputs/a"})
		}
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, v := range views {
				resp, err := http.Get(srv.URL + "/api/runs/r" + v)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %d", v, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	<-done
	var items []map[string]any
	if err := json.Unmarshal(get(t, srv.URL+"/api/runs/r/evidence"), &items); err != nil || len(items) != 50 {
		t.Fatalf("%d evidence items after 50 appended (%v)", len(items), err)
	}
}
