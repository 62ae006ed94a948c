package runstate

import (
	"errors"
	"sync"

	"github.com/apodex/apodex/internal/record"
)

// Live is the state of a run whose log is open in this process, kept in
// step with it: every Read first folds what was appended since the last
// one (record.Log.Cursor), so it never re-reads events.jsonl and never
// misses an event appended before the Read began. Safe for concurrent use.
type Live struct {
	mu  sync.Mutex
	st  *State
	cur *record.Cursor
	err error // the first event the state refused, or the cursor's failure
}

// NewLive follows log from its first event.
func NewLive(log *record.Log) (*Live, error) {
	cur, err := log.Cursor(0)
	if err != nil {
		return nil, err
	}
	return &Live{st: New(), cur: cur}, nil
}

// Read folds every event appended so far, then calls fn with the state;
// fn must not keep it (or anything in it that later events change) after
// it returns. An event the state refuses is an error of this Read and of
// every later one; fn is not called then.
func (l *Live) Read(fn func(*State)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		evs, err := l.cur.Next()
		for _, e := range evs {
			if err := l.st.Apply(e); err != nil {
				l.err = err
				break
			}
		}
		if err != nil && !errors.Is(err, record.ErrClosed) && l.err == nil {
			l.err = err
		}
	}
	if l.err != nil {
		return l.err
	}
	fn(l.st)
	return nil
}

// Close stops following the log.
func (l *Live) Close() { l.cur.Close() }
