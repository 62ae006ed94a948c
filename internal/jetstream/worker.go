package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
)

// Worker pulls rollouts from the queue and runs them in this process.
type Worker struct {
	Conn     *Conn
	Name     string
	Parallel int          // rollouts at once; default 1
	Options  eval.Options // Home, Sandbox, NewModel of this machine
	Version  string       // this binary's Apodex version; a job of another is left for another worker
	Log      *slog.Logger
	// Progress gets one line per rollout this worker finishes; may be nil.
	Progress io.Writer

	crash         *crashLog // set by Run
	running, done atomic.Int64
}

// Run pulls and runs rollouts until ctx ends; then it stops pulling,
// hands back (naks) the rollouts it holds, releases their leases, and
// returns once they have stopped.
func (w *Worker) Run(ctx context.Context) error {
	if w.Parallel < 1 {
		w.Parallel = 1
	}
	cons, err := w.Conn.js.Consumer(ctx, RolloutStream, WorkConsumer)
	if err != nil {
		return fmt.Errorf("jetstream: worker: %w", err)
	}
	crash, cleaned, unended, err := openCrashLog(w.Options.Home, w.Name)
	if err != nil {
		return err
	}
	defer crash.close()
	if len(cleaned) > 0 {
		w.logger().Warn("cleaned up the runs a crashed worker of this home left", "runs", cleaned)
	}
	w.crash = crash
	for _, r := range unended { // their rollouts went back to the queue when the leases ran out
		if r.Job != nil {
			w.abandon(*r.Job, r.ID, "its worker died mid-rollout (found by worker "+w.Name+" at start)")
		}
	}
	hctx, stopBeat := context.WithCancel(ctx)
	beatDone := make(chan struct{})
	go func() { defer close(beatDone); w.heartbeat(hctx, &w.running, &w.done) }()
	defer func() { stopBeat(); <-beatDone }()
	slots := make(chan struct{}, w.Parallel)
	var wg sync.WaitGroup
	defer wg.Wait() // before crash.close: runs still going are not clean yet
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			w.logger().Warn("fetch", "err", err)
			time.Sleep(250 * time.Millisecond)
			continue
		}
		got := false
		for msg := range batch.Messages() {
			got = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				w.handle(ctx, msg)
			}()
		}
		if !got {
			<-slots
		}
	}
}

// handle runs one delivered rollout to a result, a hand-back or a drop.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	var j eval.Job
	if err := json.Unmarshal(msg.Data(), &j); err != nil {
		w.logger().Error("unreadable rollout message; dropped", "err", err)
		msg.Term()
		return
	}
	log := w.logger().With("eval", j.Eval, "rollout", j.Key())
	if w.Version != "" && j.Version != w.Version {
		log.Warn("rollout of another Apodex version; left for another worker", "eval_version", j.Version, "worker_version", w.Version)
		msg.NakWithDelay(5 * time.Second)
		return
	}
	// A rollout redelivered after its result was stored (its worker died
	// before the ack) is done.
	if done, err := w.Conn.Scored(ctx, j); err == nil && done {
		msg.Ack()
		return
	}
	lease, err := w.Conn.Acquire(ctx, j, w.Name)
	if errors.Is(err, ErrHeld) {
		msg.NakWithDelay(w.Conn.LeaseTTL / 2)
		return
	} else if err != nil {
		log.Warn("lease", "err", err)
		msg.NakWithDelay(time.Second)
		return
	}
	if err := w.Conn.fetchWorld(ctx, w.Options.Home, j.World.ID); isUnavailable(err) || err != nil && ctx.Err() != nil {
		// The queue's servers (a node being lost or elected) or this
		// worker's stop, not the rollout: no failure is published.
		log.Warn("world not fetched; the queue is unavailable, rollout handed back", "err", err)
		lease.Release(context.WithoutCancel(ctx))
		msg.NakWithDelay(time.Second)
		return
	} else if err != nil {
		w.finish(ctx, msg, j, lease, eval.Result{World: j.World.ID, WorldName: j.World.Name, Family: j.World.Family, Level: j.World.Level,
			Config: j.Config.Name, Rollout: j.Rollout, Status: "failed", Error: err.Error(), FinishedAt: time.Now().UTC()})
		return
	}
	// The rollout runs under its own context: cancelled when the worker
	// stops (hand back) or the lease is lost (fenced).
	w.running.Add(1)
	defer w.running.Add(-1)
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	runID := ""
	stopKeep := w.keepAlive(rctx, msg, lease, func() string { mu.Lock(); defer mu.Unlock(); return runID }, cancel)
	res := eval.RunOne(rctx, j, w.Options, func(id string) {
		if w.crash != nil {
			w.crash.add(id, j)
		}
		mu.Lock()
		runID = id
		mu.Unlock()
	})
	stopKeep()
	switch cause := context.Cause(rctx); {
	case errors.Is(cause, ErrFenced):
		log.Warn("lease lost; this run is abandoned, not counted", "run", res.RunID)
		w.abandon(j, res.RunID, "its worker lost the lease (stalled or cut off past the lease TTL); the rollout went to another worker")
		return
	case ctx.Err() != nil && res.Status != "completed":
		log.Info("stopping; rollout handed back", "run", res.RunID)
		lease.Release(context.Background())
		msg.Nak()
		w.abandon(j, res.RunID, "its worker was stopped and handed the rollout back")
		return
	}
	// A stop asked for now does not cut the shipping of a finished run.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), w.Conn.LeaseTTL)
	defer fcancel()
	w.finish(fctx, msg, j, lease, res)
}

// keepAlive renews the lease and the ack deadline every TTL/3 until the
// returned stop is called; a lost lease cancels the rollout with
// ErrFenced.
func (w *Worker) keepAlive(ctx context.Context, msg jetstream.Msg, lease *Lease, runID func() string, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.Conn.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			msg.InProgress()
			if err := lease.Renew(ctx, runID()); errors.Is(err, ErrFenced) {
				cancel(ErrFenced)
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// finish ships the record, commits the lease and publishes the result;
// the message is acked only once the result is stored.
func (w *Worker) finish(ctx context.Context, msg jetstream.Msg, j eval.Job, lease *Lease, res eval.Result) {
	log := w.logger().With("eval", j.Eval, "rollout", j.Key())
	attempts := max(j.MaxAttempts, 1)
	if j.MaxAttempts == 0 {
		attempts = 2
	}
	if res.Error != "" && res.RunID == "" {
		if n := w.Conn.failedAttempt(ctx, j); n < attempts {
			log.Warn("rollout failed to run; retrying", "err", res.Error, "attempt", n)
			lease.Release(ctx)
			msg.NakWithDelay(time.Duration(n) * time.Second)
			return
		}
	}
	out := Outcome{Result: res, Worker: w.Name}
	if validRunID(res.RunID) {
		dir := filepath.Join(w.Options.Home, "runs", res.RunID)
		err := putDir(ctx, w.Conn.records, res.RunID, dir, "world")
		switch {
		case IsFull(err):
			// Retrying cannot help: the result says so (and is acked
			// once stored); the run stays here.
			log.Error("record store full; the result says so", "run", res.RunID, "err", err)
			out.Result = recordNotStored(res, w.Name, err)
		case err != nil:
			// Nothing is acked that was not stored: hand it back.
			log.Error("record not stored; rollout handed back", "run", res.RunID, "err", err)
			lease.Release(ctx)
			msg.NakWithDelay(5 * time.Second)
			return
		default:
			out.Record = res.RunID
		}
	}
	if err := lease.Commit(ctx); err != nil {
		log.Warn("result not published", "run", res.RunID, "err", err)
		w.abandon(j, res.RunID, fmt.Sprintf("its worker could not commit the lease (%v); the rollout stays queued", err))
		return
	}
	out.Token = lease.Token
	raw, _ := json.Marshal(out)
	err := w.Conn.publishResult(ctx, resultSubjectOf(j), raw)
	switch {
	case isWrongLastSeq(err):
		log.Info("rollout was already scored; this run is not counted", "run", res.RunID)
		w.abandon(j, res.RunID, "another run of the rollout was scored first")
	case err != nil:
		log.Error("publish result; rollout stays queued", "err", err)
		w.abandon(j, res.RunID, fmt.Sprintf("its result could not be published (%v); the rollout stays queued", err))
		return
	default:
		if w.crash != nil && validRunID(res.RunID) {
			w.crash.end(res.RunID)
		}
	}
	msg.DoubleAck(ctx)
	w.done.Add(1)
	if w.Progress != nil && err == nil {
		mark := "FAILED"
		if res.Correct == 1 {
			mark = "passed"
		}
		fmt.Fprintf(w.Progress, "worker %s: %s %s %s #%d %s (run %s)\n", w.Name, j.Eval, j.World.Name, j.Config.Name, j.Rollout, mark, res.RunID)
	}
}

// publishResult publishes a result unless its subject holds one, trying
// again (up to 3 times) while the servers do not answer; a try refused
// after one whose ack was lost counts if the subject holds this very
// result (that try landed: the run is counted, so it must not be called
// abandoned).
func (c *Conn) publishResult(ctx context.Context, subject string, raw []byte) error {
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, tryTimeout)
		_, err := c.js.Publish(tctx, subject, raw, jetstream.WithExpectLastSequencePerSubject(0))
		cancel()
		switch {
		case err == nil:
			return nil
		case isWrongLastSeq(err):
			if try > 0 {
				if m, gerr := c.results.GetLastMsgForSubject(ctx, subject); gerr == nil && bytes.Equal(m.Data, raw) {
					return nil
				}
			}
			return err
		case !isUnavailable(err) || try == 2 || !sleepCtx(ctx, time.Duration(try+1)*250*time.Millisecond):
			return err
		}
	}
}

// recordNotStored is res when its record could not be stored: a failed
// rollout, not counted as passed (nothing on the eval's host shows it),
// with the reason and where the run stays; its measures are kept.
func recordNotStored(res eval.Result, worker string, err error) eval.Result {
	res.Error = joinErr(res.Error, fmt.Sprintf("record of run %s not stored: object store %s is full (%v); the run stays on worker %s's home; free space or raise the store's limit", res.RunID, RecordStore, err, worker))
	res.Status, res.Correct, res.RunID = "failed", 0, ""
	return res
}

func (w *Worker) logger() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}
