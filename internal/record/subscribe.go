package record

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
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
// writes the log (the progress printer, telemetry, the team); another
// process uses Follow.
//
// Delivery: every event, in order, none lost or repeated; Append never
// waits for a subscriber (a slow one queues the events in memory until it
// takes them). The sequence ends when ctx ends, or when the log is closed
// and every event before the close has been yielded; a read error of the
// catch-up is yielded once and ends it.
func (l *Log) Subscribe(ctx context.Context, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		s := &sub{wake: make(chan struct{}, 1)}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			yield(Event{}, ErrClosed)
			return
		}
		upto := l.seq // every event up to here is in the file; later ones come to s
		if l.subs == nil {
			l.subs = map[*sub]struct{}{}
		}
		l.subs[s] = struct{}{}
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			delete(l.subs, s)
			l.mu.Unlock()
		}()
		if after < upto {
			if !l.replay(after, upto, yield) {
				return
			}
		}
		for {
			q, closed := s.take()
			for _, e := range q {
				if e.Seq > after && !yield(e, nil) {
					return
				}
			}
			if closed {
				if q, _ := s.take(); len(q) == 0 {
					return
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			}
		}
	}
}

// replay yields the events of the file with after < seq <= upto; false
// when the consumer stopped or the read failed.
func (l *Log) replay(after, upto int64, yield func(Event, error) bool) bool {
	f, err := os.Open(filepath.Join(l.dir, EventsFile))
	if err != nil {
		yield(Event{}, fmt.Errorf("record: subscribe: %w", err))
		return false
	}
	defer f.Close()
	sc := NewScanner(f)
	for sc.Next() {
		e := sc.Event()
		if e.Seq > upto {
			break
		}
		if e.Seq > after && !yield(e, nil) {
			return false
		}
	}
	if err := sc.Err(); err != nil {
		yield(Event{}, fmt.Errorf("record: subscribe: %w", err))
		return false
	}
	return true
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
		s.push(e)
	}
}

// closeSubs ends every subscription once it has taken its events (l.mu held).
func (l *Log) closeSubs() {
	for s := range l.subs {
		s.close()
	}
}
