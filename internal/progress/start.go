package progress

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// Follow prints the events of the run in dir after seq after, as they
// land, until the run finishes or ctx ends (New, then Printer.Follow).
func Follow(ctx context.Context, dir string, after int64, w io.Writer, opt Options) error {
	return New(w, opt).Follow(ctx, dir, after)
}

// Follow prints the events of the run in dir after seq after, as they
// land, until the run finishes or ctx ends; the events up to after still
// count (the start time, the tokens so far). A ticker it owns beats Tick
// once a second while it follows.
func (p *Printer) Follow(ctx context.Context, dir string, after int64) error {
	return p.FollowEvents(ctx, record.Follow(ctx, dir, 0), after)
}

// FollowEvents is Follow over events, a run's events from seq 1: those of
// record.Follow (another process's run) or of the run's own log
// (record.Log.Subscribe, in the process that runs it: no polling). It
// prints until events end or ctx ends.
func (p *Printer) FollowEvents(ctx context.Context, events iter.Seq2[record.Event, error], after int64) error {
	tctx, stopTicks := context.WithCancel(ctx)
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
				p.Tick(p.opt.Now())
			}
		}
	}()
	defer func() {
		stopTicks()
		<-ticked
		p.End()
	}()
	for e, err := range events {
		if err != nil {
			return err
		}
		if e.Seq <= after {
			p.mu.Lock()
			pl, _ := record.DecodePayload(e) // nil when it does not decode
			p.note(e, pl)
			p.mu.Unlock()
			continue
		}
		p.Event(e)
	}
	return nil
}

// Start prints the progress of the run in dir on w from its record, after
// event after, in a goroutine it owns (New, then Printer.Start).
func Start(ctx context.Context, dir string, after int64, w io.Writer, opt Options) (stop func(started bool)) {
	return New(w, opt).Start(ctx, dir, after)
}

// Start follows the run in dir in a goroutine it owns: stop(started) waits
// for the record's end (at most a few seconds) when the run started, else
// ends it at once, and returns when the goroutine has ended. Ctrl-C (ctx)
// does not end it: the run records how it ended, and that is worth
// printing.
func (p *Printer) Start(ctx context.Context, dir string, after int64) (stop func(started bool)) {
	return p.launch(ctx, after, func(ctx context.Context) iter.Seq2[record.Event, error] { return record.Follow(ctx, dir, 0) })
}

// StartLog is Start for the run whose log is in this process: it takes
// the events from the log itself (record.Log.Subscribe), never polling
// the file; they end when the log is closed.
func (p *Printer) StartLog(ctx context.Context, log *record.Log, after int64) (stop func(started bool)) {
	return p.launch(ctx, after, func(ctx context.Context) iter.Seq2[record.Event, error] { return log.Subscribe(ctx, 0) })
}

func (p *Printer) launch(ctx context.Context, after int64, events func(context.Context) iter.Seq2[record.Event, error]) (stop func(started bool)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = p.FollowEvents(ctx, events(ctx), after)
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
			fmt.Fprintf(p.w, "apodex: progress stopped: %v\n", err)
		}
	}
}
