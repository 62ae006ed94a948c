package progress

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Start prints the progress of the run in dir on w from its record, after
// event after, in a goroutine it owns: stop(started) waits for the record's
// end (at most a few seconds) when the run started, else ends it at once,
// and returns when the goroutine has ended. Ctrl-C (ctx) does not end it:
// the run records how it ended, and that is worth printing.
func Start(ctx context.Context, dir string, after int64, w io.Writer, opt Options) (stop func(started bool)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = Follow(ctx, dir, after, w, opt)
	}()
	return func(started bool) {
		if started {
			select { // the record ends with run_finished: Follow ends by itself
			case <-done:
			case <-time.After(5 * time.Second):
			}
		}
		cancel()
		<-done
		if err != nil && started { // a run that never started has no record to follow
			fmt.Fprintf(w, "apodex: progress stopped: %v\n", err)
		}
	}
}
