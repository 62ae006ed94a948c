package web

// One live state per open run: the first request for a run folds its
// record once (runstate.LoadEach); every later request folds only the
// events appended since (Refresh reads from where the last read ended) and
// serves its view from the state. At most maxLive runs are kept; the one
// used least recently is dropped first (a request for it loads it again).

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/transcript"
)

// maxLive is how many runs' states the server keeps.
const maxLive = 32

// liveRun is one run's state kept in step with its record.
type liveRun struct {
	dir string

	mu        sync.Mutex
	st        *runstate.Loaded
	first     time.Time          // the first event's time
	entries   []transcript.Entry // the readable transcript, in seq order
	texts     map[string]string  // evidence texts read from their blobs
	info      *runview.Info      // the summary, for info.Events events
	ledger    *claims.Ledger     // the claim ledger at ledgerSeq
	ledgerSeq int64
	used      time.Time
}

// lives is the server's live states, by run directory.
type lives struct {
	mu   sync.Mutex
	runs map[string]*liveRun
}

// get returns the live state of the run in dir, loaded on first use and
// refreshed; it is locked: the caller calls unlock when done reading it.
func (ls *lives) get(dir string) (*liveRun, error) {
	ls.mu.Lock()
	if ls.runs == nil {
		ls.runs = map[string]*liveRun{}
	}
	l := ls.runs[dir]
	if l == nil {
		l = &liveRun{dir: dir, texts: map[string]string{}}
		ls.runs[dir] = l
		ls.evict()
	}
	l.used = time.Now()
	ls.mu.Unlock()

	l.mu.Lock()
	var err error
	if l.st == nil {
		l.st, err = runstate.LoadEach(dir, l.observe)
	} else {
		err = l.st.Refresh()
	}
	if err != nil {
		l.st = nil // loaded again next time
		l.entries, l.info, l.ledger = nil, nil, nil
		l.mu.Unlock()
		return nil, err
	}
	return l, nil
}

func (l *liveRun) unlock() { l.mu.Unlock() }

// observe keeps what the state does not hold in step with it. A reload
// shows it the events again: it takes each seq once.
func (l *liveRun) observe(e record.Event) {
	if e.Seq == 1 {
		l.first = e.Time
	}
	if n := len(l.entries); n > 0 && l.entries[n-1].Seq >= e.Seq {
		return
	}
	l.entries = append(l.entries, transcript.Entries(e, transcript.Options{})...)
}

// evict drops the least recently used runs over maxLive (ls.mu held).
func (ls *lives) evict() {
	for len(ls.runs) > maxLive {
		var oldest *liveRun
		for _, l := range ls.runs {
			if oldest == nil || l.used.Before(oldest.used) {
				oldest = l
			}
		}
		delete(ls.runs, oldest.dir)
	}
}

// summary is the run's Info, made again only when the record grew.
func (l *liveRun) summary() runview.Info {
	if l.info == nil || l.info.Events != l.st.Events {
		in := runview.InfoOf(l.st)
		l.info = &in
	}
	return *l.info
}

// claimLedger is the claim ledger, derived again only when the record grew.
func (l *liveRun) claimLedger() *claims.Ledger {
	if l.ledger == nil || l.ledgerSeq != l.st.Seq {
		l.ledger, l.ledgerSeq = l.st.Claims.Ledger(), l.st.Seq
	}
	return l.ledger
}

// transcriptAfter is the transcript entries of events after seq.
func (l *liveRun) transcriptAfter(seq int64) []transcript.Entry {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Seq > seq })
	return append([]transcript.Entry{}, l.entries[i:]...)
}

// liveness is runview.Liveness with what the state knows: a record that
// ends with run_finished is finished without another look at the file.
func (l *liveRun) liveness() string {
	if l.st.Finished != nil && l.st.FinishedSeq == l.st.Seq {
		return runview.Finished
	}
	return runview.Liveness(l.dir)
}

// getLive serves view of the run's live state as JSON. The view is
// marshalled while the state is locked (it may share the state's slices)
// and written after.
func (s *Server) getLive(view func(*liveRun) (any, error)) func(w http.ResponseWriter, r *http.Request, dir string) error {
	return func(w http.ResponseWriter, r *http.Request, dir string) error {
		l, err := s.live.get(dir)
		if err != nil {
			return err
		}
		v, err := view(l)
		var body []byte
		if err == nil {
			body, err = json.MarshalIndent(v, "", " ")
		}
		l.unlock()
		if err != nil {
			return err
		}
		writeRaw(w, http.StatusOK, append(body, '\n'))
		return nil
	}
}
