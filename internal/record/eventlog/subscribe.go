package eventlog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// ErrClosed: the log was closed.
var ErrClosed = errors.New("record: log is closed")

// sub is one in-process subscriber: Append queues each event for it.
type sub struct {
	mu     sync.Mutex
	queue  []Event
	closed bool          // the log closed: no more events will come
	wake   chan struct{} // signalled (never blocking) when queue or closed change
	types  []string      // the event types it keeps (all when empty)
}

func (s *sub) push(e Event) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	s.signal()
}

func (s *sub) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether the log has closed.
func (s *sub) take() ([]Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q, s.closed
}

// Subscribe yields the events of this log with seq > after, in seq order,
// each once: first those already written (read once from events.jsonl),
// then each event Append writes, handed over in memory as it is written —
// no polling, no re-reading. It is for consumers in the process that
// writes the log (the progress printer, telemetry); another process uses
// Follow.
//
// Delivery: every event, in order, none lost or repeated; Append never
// waits for a subscriber (a slow one queues the events in memory until it
// takes them). The sequence ends when ctx ends, or when the log is closed
// and every event before the close has been yielded; a read error of the
// catch-up is yielded once and ends it.
func (l *Log) Subscribe(ctx context.Context, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		c, err := l.Cursor(after)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer c.Close()
		for {
			evs, err := c.Next()
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
			}
			if err != nil {
				if !errors.Is(err, ErrClosed) {
					yield(Event{}, err)
				}
				return
			}
			if len(evs) > 0 {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-c.s.wake:
			}
		}
	}
}

// Cursor is a pull subscription to a log in this process: Next returns,
// without waiting, every event appended since the last Next (the first
// Next: those after the cursor's seq, read once from the file). Whoever
// must see everything appended up to a moment (a verifier checking a
// citation, the team's live state) calls Next then. Events are queued in
// memory between calls: call Next often, or Close. Not safe for
// concurrent use.
type Cursor struct {
	l           *Log
	s           *sub
	after, upto int64
	caught      bool
}

// Cursor subscribes from seq after; types, when given, are the only event
// types it keeps (the others are not queued).
func (l *Log) Cursor(after int64, types ...string) (*Cursor, error) {
	s := &sub{wake: make(chan struct{}, 1), types: types}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.subs == nil {
		l.subs = map[*sub]struct{}{}
	}
	l.subs[s] = struct{}{}
	// Every event up to upto is in the file; every later one comes to s.
	return &Cursor{l: l, s: s, after: after, upto: l.seq}, nil
}

// Next returns the events appended since the last call, in seq order;
// ErrClosed (with the last events) once the log is closed and none are
// left.
func (c *Cursor) Next() ([]Event, error) {
	var out []Event
	if !c.caught {
		c.caught = true
		if c.after < c.upto {
			var err error
			if out, err = c.l.replay(c.after, c.upto, c.s.types); err != nil {
				return out, err
			}
		}
	}
	q, closed := c.s.take()
	for _, e := range q {
		if e.Seq > c.after {
			out = append(out, e)
		}
	}
	if closed && len(out) == 0 {
		return nil, ErrClosed
	}
	return out, nil
}

// Close ends the subscription.
func (c *Cursor) Close() {
	c.l.mu.Lock()
	delete(c.l.subs, c.s)
	c.l.mu.Unlock()
}

// replay is the events of the file with after < seq <= upto (of types,
// when given).
func (l *Log) replay(after, upto int64, types []string) ([]Event, error) {
	f, err := os.Open(filepath.Join(l.dir, EventsFile))
	if err != nil {
		return nil, fmt.Errorf("record: subscribe: %w", err)
	}
	defer f.Close()
	var out []Event
	sc := NewScanner(f)
	for sc.Next() {
		e := sc.Event()
		if e.Seq > upto {
			break
		}
		if e.Seq > after && (len(types) == 0 || slices.Contains(types, e.Type)) {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("record: subscribe: %w", err)
	}
	return out, nil
}

// publish hands the line Append just wrote to every subscriber (l.mu
// held), as a reader of the file would decode it.
func (l *Log) publish(seq int64, t time.Time, typ, agent string, prev [32]byte, line []byte) {
	if len(l.subs) == 0 {
		return
	}
	e := Event{Seq: seq, Time: t.UTC().Round(0), Type: typ, Agent: agent, Prev: "sha256:" + hex.EncodeToString(prev[:]),
		Raw: line[:len(line)-1]}
	for s := range l.subs {
		if len(s.types) == 0 || slices.Contains(s.types, typ) {
			s.push(e)
		}
	}
}

// closeSubs ends every subscription once it has taken its events (l.mu held).
func (l *Log) closeSubs() {
	for s := range l.subs {
		s.close()
	}
}
