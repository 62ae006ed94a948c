package eventlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// subscribe collects what Subscribe yields in the background; the channel
// closes when the subscription ends.
func subscribe(ctx context.Context, l *Log, after int64) <-chan Event {
	ch := make(chan Event, 4096)
	go func() {
		defer close(ch)
		for e, err := range l.Subscribe(ctx, after) {
			if err != nil {
				ch <- Event{Type: "error: " + err.Error()}
				return
			}
			ch <- e
		}
	}()
	return ch
}

// A subscriber sees every event after its seq, those written before it
// subscribed and those appended after, concurrently, in seq order, each
// once, exactly as a reader of the file sees them; the close ends it.
func TestSubscribeSeesEveryEventInOrder(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		l.Append("note", "main", map[string]int{"i": i})
	}
	ch := subscribe(context.Background(), l, 3)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				if _, err := l.Append("note", "A", map[string]int{"w": w, "i": i}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := drain(t, ch)
	c, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Events[3:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("subscriber saw %d events, the file holds %d after seq 3; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []Event) int {
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return i
		}
	}
	return min(len(a), len(b))
}

// After its catch-up the subscription reads no file: with events.jsonl
// moved away (Append still writes to the file it holds open), the events
// appended still arrive — a tail of the path could not see them.
func TestSubscribeDoesNotPollTheFile(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append("note", "main", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := subscribe(ctx, l, 0)
	if e := next(t, ch); e.Seq != 1 {
		t.Fatalf("first event %+v", e)
	}
	if err := os.Rename(filepath.Join(dir, EventsFile), filepath.Join(dir, "moved.jsonl")); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 5; i++ {
		l.Append("note", "main", map[string]int{"i": i})
		if e := next(t, ch); e.Seq != int64(i) {
			t.Fatalf("event %+v, want seq %d", e, i)
		}
	}
}

// Cancelling the context ends the subscription, and Append goes on.
func TestSubscribeEndsWithItsContext(t *testing.T) {
	l, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ch := subscribe(ctx, l, 0)
	l.Append("note", "main", nil)
	next(t, ch)
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("an event after the cancel")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the subscription did not end with its context")
	}
	if _, err := l.Append("note", "main", nil); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	n := len(l.subs)
	l.mu.Unlock()
	if n != 0 {
		t.Errorf("%d subscribers left after the cancel", n)
	}
}

// A closed log refuses a new subscription.
func TestSubscribeClosedLog(t *testing.T) {
	l, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, err := range l.Subscribe(context.Background(), 0) {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("err %v, want ErrClosed", err)
		}
	}
}

func next(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("the subscription ended")
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

// A cursor returns at once what was appended since its last call, of the
// types it keeps, the catch-up included; after the close, ErrClosed.
func TestCursor(t *testing.T) {
	l, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(TypeToolCall, "main", map[string]string{"call_id": "c1"})
	l.Append("note", "main", nil)
	c, err := l.Cursor(0, TypeToolCall, TypeFileDelta)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seqs := func() []int64 {
		t.Helper()
		evs, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	if got := seqs(); !reflect.DeepEqual(got, []int64{1}) {
		t.Errorf("catch-up %v, want [1]", got)
	}
	if got := seqs(); got != nil {
		t.Errorf("nothing appended, got %v", got)
	}
	l.Append(TypeFileDelta, "main", map[string]string{"path": "/workspace/a"})
	l.Append("note", "main", nil)
	l.Append(TypeToolCall, "main", map[string]string{"call_id": "c2"})
	if got := seqs(); !reflect.DeepEqual(got, []int64{3, 5}) {
		t.Errorf("after appends %v, want [3 5]", got)
	}
	l.Close()
	if _, err := c.Next(); !errors.Is(err, ErrClosed) {
		t.Errorf("after the close: %v", err)
	}
}
