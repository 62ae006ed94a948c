package eventlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// collect follows dir in the background and returns a channel of what it
// yields; the channel closes when Follow ends.
func collect(ctx context.Context, dir string, after int64) <-chan Event {
	ch := make(chan Event, 1024)
	go func() {
		defer close(ch)
		for e, err := range Follow(ctx, dir, after) {
			if err != nil {
				ch <- Event{Type: "error: " + err.Error()}
				return
			}
			ch <- e
		}
	}()
	return ch
}

func drain(t *testing.T, ch <-chan Event) []Event {
	t.Helper()
	var out []Event
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("Follow did not end; got %d events", len(out))
		}
	}
}

// A concurrent writer appends while Follow reads: every event arrives once,
// in seq order, and Follow ends with run_finished.
func TestFollowConcurrentWriter(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		l.Append("tool_call", "main", map[string]int{"n": i})
	}
	ch := collect(t.Context(), dir, 0)
	const writers, each = 4, 200
	done := make(chan struct{})
	for w := range writers {
		go func() {
			for i := range each {
				l.Append("tool_result", fmt.Sprintf("A%d", w), map[string]string{"body": strings.Repeat("x", i)})
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			done <- struct{}{}
		}()
	}
	for range writers {
		<-done
	}
	l.Append(TypeRunFinished, "", RunFinished{Status: "completed"})
	l.Append("after_the_end", "", nil) // never yielded
	got := drain(t, ch)
	want := 10 + writers*each + 1
	if len(got) != want {
		t.Fatalf("got %d events, want %d (last %+v)", len(got), want, got[len(got)-1])
	}
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if last := got[len(got)-1]; last.Type != TypeRunFinished {
		t.Errorf("last event %s, want run_finished", last.Type)
	}
	var rf RunFinished
	if err := got[len(got)-1].Decode(&rf); err != nil || rf.Status != "completed" {
		t.Errorf("run_finished decodes to %+v, %v", rf, err)
	}
}

// after skips what the caller has already seen.
func TestFollowAfter(t *testing.T) {
	dir := t.TempDir()
	l, _ := Create(dir, nil)
	for range 5 {
		l.Append("x", "", nil)
	}
	l.Append(TypeRunFinished, "", nil)
	got := drain(t, collect(t.Context(), dir, 3))
	if len(got) != 3 || got[0].Seq != 4 || got[2].Type != TypeRunFinished {
		t.Fatalf("after 3: got %+v", got)
	}
	// Following past the end of a finished run yields nothing and ends.
	if got := drain(t, collect(t.Context(), dir, 6)); len(got) != 0 {
		t.Fatalf("after the end: got %+v", got)
	}
}

// A line written in two pieces is yielded once, whole, after its newline.
func TestFollowTornLine(t *testing.T) {
	dir := t.TempDir()
	l, _ := Create(dir, nil)
	l.Append("x", "", nil)
	l.Close()
	ch := collect(t.Context(), dir, 0)
	if e := <-ch; e.Seq != 1 {
		t.Fatalf("first event %+v", e)
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := string(encodeLine(2, time.Now(), "tool_call", "main", genesis, []byte(`"name":"bash"`)))
	f.WriteString(line[:20])
	select {
	case e := <-ch:
		t.Fatalf("a torn line was yielded: %+v", e)
	case <-time.After(100 * time.Millisecond):
	}
	f.WriteString(line[20:])
	e := <-ch
	var p struct{ Name string }
	if e.Seq != 2 || e.Decode(&p) != nil || p.Name != "bash" {
		t.Fatalf("completed line: %+v %q", e, p.Name)
	}
	f.WriteString(string(encodeLine(3, time.Now(), TypeRunFinished, "", genesis, nil)))
	if rest := drain(t, ch); len(rest) != 1 || rest[0].Type != TypeRunFinished {
		t.Fatalf("rest: %+v", rest)
	}
}

// A resume cuts a torn fragment off and appends after it: Follow, which
// never consumed the fragment, reads on from the new line.
func TestFollowAcrossRepair(t *testing.T) {
	dir := t.TempDir()
	l, _ := Create(dir, nil)
	l.Append("x", "", nil)
	l.Close()
	path := filepath.Join(dir, EventsFile)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":2,"time":"2026-`)
	f.Close()
	ch := collect(t.Context(), dir, 0)
	<-ch
	time.Sleep(30 * time.Millisecond) // let Follow see the fragment
	l2, _, repaired, err := Open(dir, nil)
	if err != nil || !repaired {
		t.Fatalf("open: repaired %v, %v", repaired, err)
	}
	l2.Append("resumed", "", nil)
	l2.Append(TypeRunFinished, "", nil)
	got := drain(t, ch)
	if len(got) != 2 || got[0].Type != "resumed" || got[0].Seq != 2 {
		t.Fatalf("after repair: %+v", got)
	}
}

// Follow waits for a log that does not exist yet, and ends with ctx.
func TestFollowWaitsAndStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(t.Context())
	ch := collect(ctx, dir, 0)
	time.Sleep(20 * time.Millisecond)
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(TypeRunStarted, "", nil)
	if e := <-ch; e.Type != TypeRunStarted {
		t.Fatalf("got %+v", e)
	}
	cancel()
	if rest := drain(t, ch); len(rest) != 0 {
		t.Fatalf("after cancel: %+v", rest)
	}
}

// A seq gap is an error, yielded once, and ends Follow.
func TestFollowGap(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, EventsFile), append(encodeLine(1, time.Now(), "x", "", genesis, nil), encodeLine(3, time.Now(), "x", "", genesis, nil)...), 0o644)
	var errs []error
	n := 0
	for _, err := range Follow(t.Context(), dir, 0) {
		if err != nil {
			errs = append(errs, err)
		} else {
			n++
		}
	}
	if n != 1 || len(errs) != 1 || !errors.Is(errs[0], ErrGap) {
		t.Fatalf("events %d, errors %v", n, errs)
	}
}

// A line longer than the read buffer is still read whole.
func TestFollowLongLine(t *testing.T) {
	dir := t.TempDir()
	l, _ := Create(dir, nil)
	l.Append("big", "", map[string]string{"body": strings.Repeat("y", 3*followChunk)})
	l.Append(TypeRunFinished, "", nil)
	got := drain(t, collect(t.Context(), dir, 0))
	if len(got) != 2 || len(got[0].Raw) < 3*followChunk {
		t.Fatalf("got %d events", len(got))
	}
}

// BenchmarkFollowLatency measures how long an appended event takes to
// reach a follower (the poll's first look comes followMinWait after the
// last event).
func BenchmarkFollowLatency(b *testing.B) {
	dir := b.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for _, err := range Follow(ctx, dir, 0) {
			if err != nil {
				return
			}
			got <- struct{}{}
		}
	}()
	b.ResetTimer()
	for range b.N {
		l.Append("x", "main", nil)
		<-got
	}
}

// BenchmarkFollowBacklog measures reading a record already written: 10,000
// events per op.
func BenchmarkFollowBacklog(b *testing.B) {
	dir := b.TempDir()
	l, _ := Create(dir, nil)
	for i := range 10_000 {
		l.Append("tool_result", "main", map[string]any{"n": i, "output": strings.Repeat("o", 200)})
	}
	l.Append(TypeRunFinished, "", nil)
	l.Close()
	b.ResetTimer()
	for range b.N {
		n := 0
		for _, err := range Follow(context.Background(), dir, 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10_001 {
			b.Fatalf("%d events", n)
		}
	}
}
