package run

import (
	"context"
	"sync"

	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/runview"
)

// view is the run's own projection, kept by a runview.Keeper that follows
// the record in the background while the run goes (k nil when the record
// could not be folded: then the run reads its record at the end).
type view struct {
	k      *runview.Keeper
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
	final  *runstate.Loaded
}

// keepView starts the run's keeper (the start of a segment: it writes
// the summary and the checkpoint). close ends it.
func keepView(ctx context.Context, dir string) *view {
	v := &view{}
	k, err := runview.Keep(dir)
	if err != nil {
		return v
	}
	ctx, v.cancel = context.WithCancel(ctx)
	v.k = k
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		k.Run(ctx)
	}()
	return v
}

// stop ends the background refresh; the projection is then the caller's.
func (v *view) stop() {
	if v.k != nil {
		v.cancel()
		v.wg.Wait()
	}
}

// state stops the background refresh and returns the projection up to
// the last event appended (nil if unknown).
func (v *view) state() *runstate.Loaded {
	v.stop()
	if v.k == nil {
		return nil
	}
	st, err := v.k.State()
	if err != nil {
		return nil
	}
	return st
}

// close folds the rest, writes the summary and checkpoint of the segment's
// end, and returns the final projection (nil if unknown). Only the first
// call writes.
func (v *view) close() *runstate.Loaded {
	v.closed.Do(func() {
		v.stop()
		if v.k == nil {
			return
		}
		if st, err := v.k.Close(); err == nil {
			v.final = st
		}
	})
	return v.final
}
