package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/apodex/apodex/internal/inbox"
	"github.com/apodex/apodex/internal/record"
)

// A record is played in segments: one per process that ran the run (the
// first, then one per resume). Within a segment the user's controls (pause,
// resume, cancel, budget changes; sent as commands or inside messages) are
// sent to the replay's own inbox at the point of the record where the
// original applied them, so a cancelled run stops where the cancel stopped
// it. A segment that ended in a stop (kill, crash) is halted the way a kill
// would halt it, once the replay has caught up with the original's last
// event: its record is cut there and the replay is resumed, so the call the
// stop cut off is interrupted, as recorded, and not run to its end. The
// record does not say how far the original got into that call, only that
// it had started: the replay halts as soon as it has started too.

// A segment that ended with run_finished (a resumable end, or a finished
// run that was continued) is played to its own end, not halted; the next
// is resumed, or continued with the same follow-up.

// segment is one process's part of the record.
type segment struct {
	end    int64 // the last seq before the stop; 0 for the last segment
	inputs []userInput
	// finished: the segment ended with run_finished, by itself.
	finished bool
	followUp string // the follow-up that opened this segment (apodex continue)
	// before are the controls queued before the segment's process started
	// (resume --budget): applied before its first tracked event, they are
	// sent before the segment is resumed.
	before []userInput
}

// userInput is a control the original applied, at the point it did.
type userInput struct {
	seq   int64
	after time.Duration // since the last tracked event before it
	kind  string        // a control command; "" for a message
	args  map[string]string
	text  string // a message that carried a control
}

// segmentsOf splits a record at its resumed events.
func segmentsOf(events []event) []segment {
	segs := []segment{{}}
	var lastTracked time.Time
	lastFinished := false // the last event was run_finished
	fresh := false        // in a resumed segment, before its first tracked event
	for _, e := range events {
		cur := &segs[len(segs)-1]
		p := e.p
		switch p := p.(type) {
		case *record.Resumed:
			cur.end, cur.finished = p.AfterSeq, lastFinished
			segs = append(segs, segment{followUp: p.FollowUp})
			fresh = true
			continue
		case *record.Control:
			in := userInput{seq: e.Seq, after: e.Time.Sub(lastTracked), kind: p.Kind, args: p.Args}
			if fresh {
				cur.before = append(cur.before, in)
			} else {
				cur.inputs = append(cur.inputs, in)
			}
		case *record.Message:
			if p.Control != "" {
				text := p.Original
				if text == "" {
					text = p.Text
				}
				cur.inputs = append(cur.inputs, userInput{seq: e.Seq, after: e.Time.Sub(lastTracked), text: text})
			}
		}
		if len(keysOf(p, e.Agent)) > 0 {
			lastTracked, fresh = e.Time, false
		}
		_, lastFinished = p.(*record.RunFinished)
	}
	return segs
}

// play sends a segment's controls to the replay's inbox at their points,
// then, for a segment that ended in a stop, sends on cut the replay's line
// count at the stop and closes halt.
func (s segment) play(ctx context.Context, g *orderGate, dir string, halt chan<- struct{}, cut chan<- int, note func(string)) {
	for _, in := range s.inputs {
		if _, n := g.caughtUp(ctx, in.seq, "the user's control"); n != "" {
			note(n)
		}
		if !sleep(ctx, min(max(in.after, 0), g.wait)) {
			return
		}
		var err error
		if in.kind != "" {
			err = inbox.Control(dir, in.kind, in.args)
		} else {
			_, err = inbox.Send(dir, "user", in.text)
		}
		if err != nil {
			note(fmt.Sprintf("the control at seq %d could not be sent to the replay: %v", in.seq, err))
		}
	}
	if s.end == 0 || s.finished {
		return
	}
	lines, n := g.caughtUp(ctx, s.end+1, "the stop after")
	if n != "" {
		note(n)
	}
	cut <- lines
	close(halt)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
