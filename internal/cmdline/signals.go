package cmdline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// errCancelledForGood is the cause of the context a second Ctrl-C ends.
var errCancelledForGood = errors.New("cancelled by a second Ctrl-C")

// cancelWindow is how long after the first Ctrl-C a second one cancels the
// run for good instead of letting it stop resumably.
const cancelWindow = 2 * time.Second

// haltKey carries the halt a first signal closes: a run started with it
// as its Config.Halt stops resumably (apodex resume goes on).
type haltKey struct{}

type halt struct {
	ch      chan struct{}
	claimed atomic.Bool // a run listens: a signal stops it instead of ending the context
}

// HaltOf is the channel a run passes as Config.Halt (nil outside main).
func HaltOf(ctx context.Context) <-chan struct{} {
	h, _ := ctx.Value(haltKey{}).(*halt)
	if h == nil {
		return nil
	}
	h.claimed.Store(true)
	return h.ch
}

// SignalContext is main's signal handling. The first Ctrl-C says what
// happens and, unless a second one comes within cancelWindow, stops the
// run resumably (closes the halt channel); a second one cancels the
// context, which ends the run for good (cancelled). SIGTERM stops the run
// resumably at once. A command that runs no agent (it never asked HaltOf)
// sees its context end at the first signal.
func SignalContext(parent context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	h := &halt{ch: make(chan struct{})}
	ctx = context.WithValue(ctx, haltKey{}, h)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	stopRun := func() { once.Do(func() { close(h.ch) }) }
	go func() {
		var first time.Time
		var timer <-chan time.Time
		for {
			select {
			case <-done:
				return
			case <-timer:
				stopRun()
			case s := <-sigs:
				switch {
				case !h.claimed.Load(): // no run to stop: the command ends
					cancel(errors.New("interrupted"))
					return
				case !first.IsZero() && time.Since(first) <= cancelWindow:
					fmt.Fprintln(stderr, "\napodex: cancelling the run for good")
					cancel(errCancelledForGood)
					return
				case s == syscall.SIGTERM:
					first = time.Now()
					fmt.Fprintln(stderr, "\napodex: SIGTERM: stopping the run; apodex resume RUN goes on from here")
					stopRun()
				default:
					first = time.Now()
					fmt.Fprintf(stderr, "\napodex: stopping the run in %v (apodex resume RUN goes on from here); press Ctrl-C again to cancel it for good\n", cancelWindow)
					timer = time.After(cancelWindow)
				}
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}
