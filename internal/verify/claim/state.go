package claim

import (
	"sync"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// State is a run's state kept in step with its log in this process
// (runstate.Live: folded in memory as events are appended, never re-read
// from events.jsonl), made on first use and shared by the team, the
// checker and the writer. A failure to follow the log is recorded once,
// as a warning. Safe for concurrent use.
type State struct {
	log  *record.Log
	once sync.Once
	warn sync.Once
	live *runstate.Live
	err  error
}

// NewState follows log (nil: a run without a record, whose state stays
// empty).
func NewState(log *record.Log) *State { return &State{log: log} }

// Read calls fn with the run's state now; fn must not keep it, nor call
// Read.
func (s *State) Read(fn func(*runstate.State)) error {
	if s == nil || s.log == nil {
		fn(runstate.New())
		return nil
	}
	s.once.Do(func() { s.live, s.err = runstate.NewLive(s.log) })
	err := s.err
	if err == nil {
		err = s.live.Read(fn)
	}
	if err != nil {
		s.warn.Do(func() {
			s.log.Append(record.TypeWarning, "runtime", record.Warning{Code: "record",
				Message: "the runtime's view of the record stopped (" + err.Error() + "); claim checks see no claims after it"})
		})
	}
	return err
}

// Ledger is the run's claim ledger now (empty when the state cannot be
// read; Read records why).
func (s *State) Ledger() *claims.Ledger {
	l := &claims.Ledger{}
	s.Read(func(st *runstate.State) { l = st.Claims.Ledger() })
	return l
}
