package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"time"
)

// Follow polls: the first look after a quiet spell comes soon, then less
// often, so a live run is followed within milliseconds and an idle one
// costs a stat every followMaxWait.
const (
	followMinWait = time.Millisecond
	followMaxWait = 200 * time.Millisecond
	followChunk   = 1 << 20 // bytes read at once
)

// ErrFollowShrank: the event log got shorter than what Follow already
// yielded, so it is not the log Follow was reading.
var ErrFollowShrank = errors.New("record: the event log shrank under Follow")

// Follow yields the events of the run in dir with seq > after: first those
// already in the log, then each one another process (or this one) appends,
// as it lands. It ends after yielding the run's terminal event
// (run_finished), when ctx ends, or at the first error (yielded once).
//
// Follow tails events.jsonl by offset and never re-reads what it has
// yielded. A line without its newline yet (a write in progress, or a torn
// tail a resume will cut off) is not yielded until it is complete. A log
// that does not exist yet is waited for. Seq numbers are checked as Read
// checks them.
func Follow(ctx context.Context, dir string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		t := tail{path: filepath.Join(dir, EventsFile), next: 1}
		defer t.close()
		wait := followMinWait
		for {
			evs, err := t.read() // the events before an error are good
			for _, e := range evs {
				if e.Seq > after && !yield(e, nil) {
					return
				}
				if e.Type == TypeRunFinished {
					return
				}
			}
			if err != nil {
				yield(Event{}, err)
				return
			}
			if len(evs) > 0 {
				wait = followMinWait
				continue
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			wait = min(wait*2, followMaxWait)
		}
	}
}

// tail reads complete lines of a growing file from where it stopped.
type tail struct {
	path string
	f    *os.File
	off  int64 // end of the last complete line read
	next int64 // the seq the next event must have
	line int   // lines read, for messages
	buf  []byte
}

// read returns the events completed since the last read (none when the
// file does not exist yet or did not grow).
func (t *tail) read() ([]Event, error) {
	if t.f == nil {
		f, err := os.Open(t.path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record: follow event log: %w", err)
		}
		t.f = f
	}
	st, err := t.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("record: follow event log: %w", err)
	}
	size := st.Size()
	if size < t.off {
		return nil, fmt.Errorf("%w (%d bytes, %d already read)", ErrFollowShrank, size, t.off)
	}
	var out []Event
	for t.off < size {
		n := min(size-t.off, int64(max(followChunk, len(t.buf))))
		if int64(cap(t.buf)) < n {
			t.buf = make([]byte, n)
		}
		buf := t.buf[:n]
		if _, err := t.f.ReadAt(buf, t.off); err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("record: follow event log: %w", err)
		}
		end := bytes.LastIndexByte(buf, '\n')
		if end < 0 {
			if t.off+n == size {
				break // an incomplete last line: wait for its newline
			}
			t.buf = make([]byte, 2*n) // a line longer than the buffer
			continue
		}
		for _, line := range bytes.Split(buf[:end], []byte("\n")) {
			t.line++
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue
			}
			e, err := decodeLine(line)
			if err != nil {
				return out, fmt.Errorf("record: line %d (seq %d expected) is garbled: %w", t.line, t.next, err)
			}
			if e.Seq != t.next {
				return out, fmt.Errorf("%w: line %d has seq %d, want %d", ErrGap, t.line, e.Seq, t.next)
			}
			t.next++
			out = append(out, e)
		}
		t.off += int64(end) + 1
	}
	return out, nil
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
