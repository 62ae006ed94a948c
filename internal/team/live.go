package team

import (
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// state calls fn with the run's state as the log holds it now: a
// runstate.Live over the team's log, folded in memory as events are
// appended, never re-read from events.jsonl. fn must not call state.
func (t *Team) state(fn func(*runstate.State)) error {
	if t.cfg.Log == nil {
		fn(runstate.New())
		return nil
	}
	t.liveOnce.Do(func() { t.rs, t.liveErr = runstate.NewLive(t.cfg.Log) })
	if t.liveErr != nil {
		return t.liveErr
	}
	return t.rs.Read(fn)
}

// ledger is the run's claim ledger now. A state that cannot be read (the
// log was closed before the first read, or holds an event the projection
// refuses) gives the empty ledger, and a warning on the record once.
func (t *Team) ledger() *claims.Ledger {
	l := &claims.Ledger{}
	if err := t.state(func(st *runstate.State) { l = st.Claims.Ledger() }); err != nil {
		t.warnLive(err)
	}
	return l
}

// warnLive records, once, that the team's live state failed.
func (t *Team) warnLive(err error) {
	t.liveWarn.Do(func() {
		t.cfg.Log.Append(record.TypeWarning, "runtime", record.Warning{Code: "record",
			Message: "the team's view of the record stopped (" + err.Error() + "); claim checks see the ledger as empty"})
	})
}
