package inbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors of the sender API.
var (
	ErrNotFound   = errors.New("inbox: no such message; list the run's messages to see their ids")
	ErrWithdrawn  = errors.New("inbox: message was withdrawn; send a new message instead")
	ErrEmpty      = errors.New("inbox: empty message text")
	ErrTooLarge   = fmt.Errorf("inbox: message text is longer than %d bytes; put large content in a file under the run's inputs and refer to it", MaxText)
	ErrNoRun      = errors.New("inbox: run directory does not exist")
	ErrBadControl = errors.New("inbox: unknown control kind (want pause, resume, cancel or budget)")
)

// TooLateError: the message is already in the model-visible history.
type TooLateError struct {
	ID   string
	Seq  int64     // the event in events.jsonl that delivered it
	Time time.Time // when the run recorded the delivery
}

func (e *TooLateError) Error() string {
	return fmt.Sprintf("inbox: message %s was already delivered (event seq %d at %s) and can no longer be changed; send a new message instead",
		e.ID, e.Seq, e.Time.UTC().Format(time.RFC3339))
}

// State of a message.
type State string

const (
	StateQueued    State = "queued"
	StateUpdated   State = "updated"
	StateWithdrawn State = "withdrawn"
	StateDelivered State = "delivered"
)

// Message is one user message as the protocol currently sees it.
type Message struct {
	ID        string    `json:"id"`
	Text      string    `json:"text"`     // latest text
	Original  string    `json:"original"` // text as first sent
	State     State     `json:"state"`
	Seq       int64     `json:"seq,omitempty"` // event seq of delivery
	Class     Class     `json:"class"`
	Sender    string    `json:"sender,omitempty"`
	Sent      time.Time `json:"sent"`
	Delivered time.Time `json:"delivered,omitzero"`
	Updates   int       `json:"updates,omitempty"`
}

// ControlCommand is a control op sent with Control.
type ControlCommand struct {
	ID     string            `json:"id"`
	Kind   string            `json:"kind"` // pause, resume, cancel or budget
	Args   map[string]string `json:"args,omitempty"`
	Sender string            `json:"sender,omitempty"`
	Time   time.Time         `json:"time"`
}

// Send queues a message for the run in dir and returns its id (M1, M2, …).
func Send(dir, sender, text string) (string, error) {
	if err := checkText(text); err != nil {
		return "", err
	}
	var id string
	err := withLock(dir, func(s *session) error {
		id = "M" + strconv.Itoa(len(s.book.msgs)+1)
		return s.append(command{Op: opSay, ID: id, Text: text, Class: Classify(text), Sender: sender, Time: time.Now()})
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// Update replaces the text of a message not yet delivered.
func Update(dir, id, text string) error {
	if err := checkText(text); err != nil {
		return err
	}
	return withLock(dir, func(s *session) error {
		if err := s.changeable(id); err != nil {
			return err
		}
		return s.append(command{Op: opUpdate, ID: id, Text: text, Class: Classify(text), Time: time.Now()})
	})
}

// Withdraw removes a message not yet delivered; it will never be delivered.
func Withdraw(dir, id string) error {
	return withLock(dir, func(s *session) error {
		if err := s.changeable(id); err != nil {
			return err
		}
		return s.append(command{Op: opWithdraw, ID: id, Time: time.Now()})
	})
}

// Control sends a control command (pause, resume, cancel, budget) to the run.
// Budget args use the keys of ParseBudget.
func Control(dir, kind string, args map[string]string) error {
	if !validKind(kind) {
		return fmt.Errorf("%w: %q", ErrBadControl, kind)
	}
	if kind == ControlBudget && len(args) == 0 {
		return errors.New("inbox: budget control needs at least one setting, e.g. turns=60")
	}
	return withLock(dir, func(s *session) error {
		id := "C" + strconv.Itoa(len(s.book.ctrls)+1)
		return s.append(command{Op: opControl, ID: id, Kind: kind, Args: args, Time: time.Now()})
	})
}

// List returns every message of the run in id order.
func List(dir string) ([]Message, error) {
	var out []Message
	err := withLock(dir, func(s *session) error {
		for _, m := range s.book.msgs {
			out = append(out, s.book.view(m))
		}
		return nil
	})
	return out, err
}

func checkText(text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return ErrEmpty
	case len(text) > MaxText:
		return ErrTooLarge
	}
	return nil
}

// session is a sender's view under the lock: both files read whole.
type session struct {
	dir   string
	inbox tail
	book  *book
}

// changeable says why message id cannot be updated or withdrawn, if so.
func (s *session) changeable(id string) error {
	m := s.book.message(id)
	if m == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	v := s.book.view(m)
	switch v.State {
	case StateDelivered:
		return &TooLateError{ID: id, Seq: v.Seq, Time: v.Delivered}
	case StateWithdrawn:
		return fmt.Errorf("%w: %s", ErrWithdrawn, id)
	}
	return nil
}

// append writes c to inbox.jsonl, terminating a torn tail left by a
// crashed writer first, in one write, then fsyncs.
func (s *session) append(c command) error {
	line := encodeLine(c)
	if s.inbox.torn() {
		line = append([]byte{'\n'}, line...)
	}
	return appendSync(filepath.Join(s.dir, InboxFile), line)
}

// withLock runs fn with the inbox lock held and both files folded.
func withLock(dir string, fn func(*session) error) error {
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	s := &session{dir: dir, inbox: tail{path: filepath.Join(dir, InboxFile)}, book: newBook()}
	if err := s.inbox.read(s.book.inboxLine); err != nil {
		return err
	}
	st := tail{path: filepath.Join(dir, StateFile)}
	if err := st.read(s.book.stateLine); err != nil {
		return err
	}
	return fn(s)
}

// lock takes the exclusive inbox lock of run directory dir. flock locks
// belong to the open file, so goroutines of one process exclude each other
// as well as other processes; the kernel drops the lock if the holder dies.
func lock(dir string) (unlock func(), err error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNoRun, dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("inbox: open lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("inbox: lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// appendSync appends line to path in one write and fsyncs it; a newly
// created file also gets its directory entry synced.
func appendSync(path string, line []byte) error {
	created := false
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		created = true
	} else if errors.Is(err, os.ErrExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err != nil {
		return fmt.Errorf("inbox: open %s: %w", filepath.Base(path), err)
	}
	_, werr := f.Write(line)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("inbox: append to %s: %w", filepath.Base(path), err)
	}
	if created {
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}
