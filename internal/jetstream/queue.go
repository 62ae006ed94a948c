package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/apodex/apodex/internal/eval"
	"github.com/apodex/apodex/internal/world"
)

// Outcome is the body of a result message.
type Outcome struct {
	Result eval.Result `json:"result"`
	Worker string      `json:"worker"`
	Token  uint64      `json:"lease_revision"` // the fencing token it was committed under
	Record string      `json:"record,omitempty"`
}

// PublishWorlds stores each world of the plan from home's store in the
// world object store, once per world id.
func (c *Conn) PublishWorlds(ctx context.Context, home string, plan *eval.Plan) error {
	st := world.NewStore(home)
	for _, pw := range plan.Worlds {
		if _, err := c.worlds.GetInfo(ctx, pw.ID); err == nil {
			continue // stored already (an eval resumed from another host has no local copy)
		}
		w, err := st.Get(pw.ID)
		if err != nil {
			return err
		}
		if err := putDir(ctx, c.worlds, pw.ID, w.Dir); IsFull(err) {
			return fmt.Errorf("jetstream: store world %s: object store %s is full (%w); nothing was queued; free space or raise the store's limit", pw.ID, WorldStore, err)
		} else if err != nil {
			return fmt.Errorf("jetstream: store world %s: %w", pw.ID, err)
		}
	}
	return nil
}

// Publish queues jobs, each with its eval and key as the message id; it
// reports how many the server took as new (a rollout already queued
// within the duplicate window is not queued twice).
func (c *Conn) Publish(ctx context.Context, jobs []eval.Job) (int, error) {
	n := 0
	for _, j := range jobs {
		raw, _ := json.Marshal(j)
		var ack *jetstream.PubAck
		var err error
		for try := 0; try < 5; try++ { // the message id makes a retry safe
			pctx, cancel := context.WithTimeout(ctx, apiTimeout)
			ack, err = c.js.Publish(pctx, rolloutSubject+j.Eval, raw, jetstream.WithMsgID(j.Eval+"/"+j.Key()))
			cancel()
			if !isUnavailable(err) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(try+1) * 500 * time.Millisecond)
		}
		if err != nil {
			return n, fmt.Errorf("jetstream: queue %s: %w", j.Key(), err)
		}
		if !ack.Duplicate {
			n++
		}
	}
	return n, nil
}

// Scored reports whether job already has a result message.
func (c *Conn) Scored(ctx context.Context, j eval.Job) (bool, error) {
	_, err := c.results.GetLastMsgForSubject(ctx, resultSubjectOf(j))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// apiTimeout bounds one JetStream API request. A request can go
// unanswered (it reached a server while the cluster elected a leader, or
// the reply was lost with a connection), and a request under a long
// context would wait for all of it: each is retried instead.
const apiTimeout = 10 * time.Second

// Collect reads eval plan's results in stream order (from the first),
// fetches each one's record into home/runs/<run-id> unless there, and adds
// it to col, until col holds every rollout of the plan and every message
// of the eval so far is read (an abandoned run reported after the last
// result is kept too), or ctx ends. Abandoned runs go to the eval's
// abandoned.jsonl, their records to home/runs. A reading that fails (a
// node lost, a leader being elected) starts again, on a new consumer,
// from the message after the last one taken; col drops those it has.
func (c *Conn) Collect(ctx context.Context, home string, plan *eval.Plan, col *eval.Collector) error {
	return c.collect(ctx, home, plan, col, false)
}

// collect is Collect; with now, it ends once it has read what the queue
// holds, complete or not, and takes the result lines alone: no record is
// fetched and no abandoned run kept (a later Collect of the home fetches
// the records of the lines it finds there and keeps those runs).
func (c *Conn) collect(ctx context.Context, home string, plan *eval.Plan, col *eval.Collector, now bool) error {
	next := uint64(0) // stream sequence of the next message to read; 0: the eval's first
	wait := 250 * time.Millisecond
	for {
		from := next
		err := c.collectOnce(ctx, home, plan, col, now, &next)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errWrite):
			return err
		}
		if next > from {
			wait = 250 * time.Millisecond // it was reading: no backoff
		}
		c.logger().Warn("reading results interrupted; reading on with a new consumer", "eval", plan.ID, "from_seq", next, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// errWrite: results.jsonl could not be written; not worth a retry.
var errWrite = errors.New("jetstream: write results")

// collectOnce reads from stream sequence *next (0: the first) on one
// ordered consumer, advancing *next past each message it has taken.
//
// The consumer may not try to recreate itself more than once: it is an
// R1 consumer, which the cluster may place on a node that has just died
// (killed, not shut down: the others count it online for up to minutes),
// and nats.go would try again under the same name forever, every try
// answered by nobody or by "consumer offline" (the eval of issue 30
// stalled so with every result stored). Its first failure ends this
// reading; the next one starts on a consumer of another name.
func (c *Conn) collectOnce(ctx context.Context, home string, plan *eval.Plan, col *eval.Collector, now bool, next *uint64) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{resultSubject + plan.ID + ".>", abandonedSubject + plan.ID + ".>"}, MaxResetAttempts: 1}
	if *next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *next
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	cons, err := c.js.OrderedConsumer(cctx, ResultStream, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("jetstream: read results: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("jetstream: read results: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	abandoned := openAbandoned(eval.Dir(home, plan.ID))
	pending := uint64(1)
	if info := cons.CachedInfo(); info != nil {
		pending = info.NumPending
	}
	for pending > 0 || !now && col.Done() < col.Total() {
		msg, err := it.Next()
		if err != nil {
			return fmt.Errorf("jetstream: read results: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("jetstream: read results: %w", err)
		}
		pending = md.NumPending
		if err := c.take(ctx, home, abandoned, col, msg, !now); err != nil {
			return err
		}
		*next = md.Sequence.Stream + 1
	}
	return nil
}

// take adds one message of the result stream to the eval: a result to
// col (with records, its record fetched unless there), an abandoned run
// to abandoned.jsonl (only with records).
func (c *Conn) take(ctx context.Context, home string, abandoned *abandonedLog, col *eval.Collector, msg jetstream.Msg, records bool) error {
	if isAbandonedSubject(msg.Subject()) {
		if !records {
			return nil
		}
		if err := c.keepAbandoned(ctx, home, abandoned, msg.Data()); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
		return nil
	}
	var o Outcome
	if err := json.Unmarshal(msg.Data(), &o); err != nil {
		return nil // not ours to judge; the key never gets a line from it
	}
	if records && o.Record != "" && validRunID(o.Record) {
		if err := c.fetchRecord(ctx, home, o.Record); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			o.Result.Error = joinErr(o.Result.Error, fmt.Sprintf("record %s not fetched: %v", o.Record, err))
		}
	}
	if _, err := col.Add(o.Result); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// keepAbandoned adds an abandoned run to the eval's abandoned.jsonl and
// fetches its record, when shipped, into home/runs (failing that, the
// line says so).
func (c *Conn) keepAbandoned(ctx context.Context, home string, l *abandonedLog, data []byte) error {
	var a Abandoned
	if json.Unmarshal(data, &a) != nil || !validRunID(a.RunID) || l.have[a.RunID] {
		return nil
	}
	if a.Shipped {
		if err := c.fetchRecord(ctx, home, a.RunID); err != nil {
			a.Shipped = false
			a.Reason += fmt.Sprintf("; its record was not fetched here (%v)", err)
		}
	}
	return l.add(a)
}

// fetchRecord fetches run id's record into home/runs/<id> unless there,
// trying again (up to 5 times) after any failure: a read cut by the loss
// of a node can end early or start mid-object ("gzip: invalid header"),
// and a fetch is idempotent (unpacked aside, renamed into place whole).
func (c *Conn) fetchRecord(ctx context.Context, home, id string) error {
	var err error
	for try := 0; try < 5; try++ {
		fctx, cancel := context.WithTimeout(ctx, 6*apiTimeout)
		err = getDir(fctx, c.records, id, filepath.Join(home, "runs", id), nil)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, jetstream.ErrObjectNotFound) {
			return err
		}
		time.Sleep(time.Duration(try+1) * 500 * time.Millisecond)
	}
	return err
}

func validRunID(id string) bool {
	return id != "" && filepath.IsLocal(id) && filepath.Base(id) == id
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// fetchWorld makes world id present in home's store, from the world
// object store.
func (c *Conn) fetchWorld(ctx context.Context, home, id string) error {
	c.fetchMu.Lock() // one fetch at a time: a world is fetched once, not once per rollout
	defer c.fetchMu.Unlock()
	st := world.NewStore(home)
	if _, err := st.Get(id); err == nil {
		return nil
	}
	if err := os.MkdirAll(st.Dir, 0o755); err != nil {
		return err
	}
	// The whole download is bounded as a record's is: without a deadline
	// nats.go would give it its 5 s request timeout.
	fctx, cancel := context.WithTimeout(ctx, 6*apiTimeout)
	defer cancel()
	if err := getDir(fctx, c.worlds, id, filepath.Join(st.Dir, id), sameWorld(id)); err != nil {
		return fmt.Errorf("jetstream: fetch world %s: %w", id, err)
	}
	return nil
}

// sameWorld refuses a fetched world whose content does not hash to id.
func sameWorld(id string) func(dir string) error {
	return func(dir string) error {
		m, err := world.Load(dir)
		if err != nil {
			return err
		}
		files, err := world.Files(dir)
		if err != nil {
			return err
		}
		if got := world.ID(m.Canonical, files); got != id {
			return fmt.Errorf("world bundle %s hashes to %s; not cached", id, got)
		}
		return nil
	}
}
