package inbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Inbox is the run's side of the queue: it reads both files incrementally
// and records deliveries. It is safe for concurrent use; one run opens one.
type Inbox struct {
	dir  string
	now  func() time.Time
	poll time.Duration

	mu       sync.Mutex
	book     *book
	inbox    tail
	state    tail
	ctrlNext int // controls before this index were returned by Controls
}

// Open opens the inbox of run directory dir (which must exist), creating
// its files if needed, and reads what is already there.
func Open(dir string) (*Inbox, error) {
	unlock, err := lock(dir) // creates the lock file; also fails on a missing dir
	if err != nil {
		return nil, err
	}
	unlock()
	for _, name := range []string{InboxFile, StateFile} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("inbox: create %s: %w", name, err)
		}
		f.Close()
	}
	in := &Inbox{
		dir: dir, now: time.Now, poll: 50 * time.Millisecond, book: newBook(),
		inbox: tail{path: filepath.Join(dir, InboxFile)},
		state: tail{path: filepath.Join(dir, StateFile)},
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.refresh(); err != nil {
		return nil, err
	}
	for in.ctrlNext < len(in.book.ctrls) && in.book.applied[in.book.ctrls[in.ctrlNext].ID].Op != "" {
		in.ctrlNext++
	}
	return in, nil
}

// Dir is the run directory.
func (in *Inbox) Dir() string { return in.dir }

// refresh reads what was appended to both files since the last read.
func (in *Inbox) refresh() error {
	if err := in.inbox.read(in.book.inboxLine); err != nil {
		return err
	}
	return in.state.read(in.book.stateLine)
}

// Pending returns the messages not yet delivered nor withdrawn, with their
// latest text, in id order. It does not take the lock: a message it returns
// can still be updated or withdrawn (see Deliver).
func (in *Inbox) Pending() ([]Message, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.refresh(); err != nil {
		return nil, err
	}
	return in.pending(), nil
}

func (in *Inbox) pending() []Message {
	var out []Message
	for _, m := range in.book.msgs {
		if v := in.book.view(m); v.State == StateQueued || v.State == StateUpdated {
			out = append(out, v)
		}
	}
	return out
}

// Messages returns every message in id order, as List does.
func (in *Inbox) Messages() ([]Message, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.refresh(); err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(in.book.msgs))
	for _, m := range in.book.msgs {
		out = append(out, in.book.view(m))
	}
	return out, nil
}

// Deliver hands each pending message, in id order, to record, which must
// put it into the model-visible history (append the message event to the
// record) and return that event's seq; then Deliver writes the delivered
// mark. The inbox lock is held throughout, so no sender can update or
// withdraw a message between reading it and acknowledging it: record must be
// quick and must not call back into the inbox. The marks of one call are
// written and fsynced together at the end. On an error from record, the
// messages recorded so far are marked and returned and the rest stay pending;
// if writing the marks fails, the record holds messages the inbox still
// calls pending, which the resume reconciliation of MarkDelivered repairs.
func (in *Inbox) Deliver(ctx context.Context, record func(Message) (seq int64, err error)) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// With nothing pending the lock is not needed: a message sent from now
	// on is seen by the next call. This is the case at almost every step.
	in.mu.Lock()
	err := in.refresh()
	idle := err == nil && len(in.pending()) == 0
	in.mu.Unlock()
	if err != nil || idle {
		return nil, err
	}
	unlock, err := lock(in.dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.refresh(); err != nil {
		return nil, err
	}
	var done []Message
	var marks []byte
	for _, m := range in.pending() {
		if err = ctx.Err(); err != nil {
			break
		}
		var seq int64
		if seq, err = record(m); err != nil {
			err = fmt.Errorf("inbox: record message %s: %w", m.ID, err)
			break
		}
		now := in.now().UTC()
		marks = append(marks, encodeLine(command{Op: opDelivered, ID: m.ID, Seq: seq, Time: now})...)
		m.State, m.Seq, m.Delivered = StateDelivered, seq, now
		done = append(done, m)
	}
	if len(marks) > 0 { // one write and one fsync for the batch
		if merr := in.appendState(marks); merr != nil {
			return done, errors.Join(err, merr)
		}
	}
	return done, err
}

// MarkDelivered records that message id entered the history at event seq.
// It is idempotent: the first mark wins. Use it to reconcile on resume with
// the message events found in the record.
func (in *Inbox) MarkDelivered(id string, seq int64) error {
	if _, ok := idNumber(id, 'M'); !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return in.locked(func() error {
		if _, ok := in.book.delivered[id]; ok {
			return nil
		}
		return in.mark(opDelivered, id, seq)
	})
}

// Controls returns the control commands that arrived since the last call
// (on the first call after Open: those not yet marked applied), in order.
func (in *Inbox) Controls() ([]ControlCommand, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.refresh(); err != nil {
		return nil, err
	}
	var out []ControlCommand
	for ; in.ctrlNext < len(in.book.ctrls); in.ctrlNext++ {
		c := in.book.ctrls[in.ctrlNext]
		if _, ok := in.book.applied[c.ID]; !ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// MarkApplied records that control id took effect at event seq, so that a
// restarted run does not apply it again. Idempotent.
func (in *Inbox) MarkApplied(id string, seq int64) error {
	if _, ok := idNumber(id, 'C'); !ok {
		return fmt.Errorf("inbox: bad control id %q", id)
	}
	return in.locked(func() error {
		if _, ok := in.book.applied[id]; ok {
			return nil
		}
		return in.mark(opApplied, id, seq)
	})
}

// locked runs fn under the inbox lock and in.mu, after a refresh.
func (in *Inbox) locked(fn func() error) error {
	unlock, err := lock(in.dir)
	if err != nil {
		return err
	}
	defer unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.refresh(); err != nil {
		return err
	}
	return fn()
}

// mark appends a delivered or applied line to the state file and folds it.
// Callers hold the lock and in.mu.
func (in *Inbox) mark(op, id string, seq int64) error {
	return in.appendState(encodeLine(command{Op: op, ID: id, Seq: seq, Time: in.now()}))
}

func (in *Inbox) appendState(lines []byte) error {
	if in.state.torn() {
		lines = append([]byte{'\n'}, lines...)
	}
	if err := appendSync(in.state.path, lines); err != nil {
		return err
	}
	return in.state.read(in.book.stateLine)
}

// Wait blocks until inbox.jsonl has changed since the last read by
// Pending, Messages, Deliver or Controls (polling its size), or ctx ends.
// A change may be a message, an update, a withdrawal or a control.
func (in *Inbox) Wait(ctx context.Context) error {
	in.mu.Lock()
	seen := in.inbox.size
	in.mu.Unlock()
	return in.waitSize(ctx, seen)
}

func (in *Inbox) waitSize(ctx context.Context, seen int64) error {
	t := time.NewTicker(in.poll)
	defer t.Stop()
	for {
		if fi, err := os.Stat(in.inbox.path); err == nil && fi.Size() != seen {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Notify is Wait as a channel, for a select next to other events: it
// receives a value each time inbox.jsonl changes (coalesced) and is closed
// when ctx ends, which also stops its goroutine. The first value comes at
// once if the file changed since the last read.
func (in *Inbox) Notify(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	in.mu.Lock()
	seen := in.inbox.size
	in.mu.Unlock()
	go func() {
		defer close(ch)
		for {
			if in.waitSize(ctx, seen) != nil {
				return
			}
			if fi, err := os.Stat(in.inbox.path); err == nil {
				seen = fi.Size()
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch
}
