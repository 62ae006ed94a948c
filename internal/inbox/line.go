package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// File names inside a run directory.
const (
	InboxFile = "inbox.jsonl"
	StateFile = "inbox-state.jsonl"
	LockFile  = "inbox.lock"
)

// Operations of a line.
const (
	opSay       = "say"
	opUpdate    = "update"
	opWithdraw  = "withdraw"
	opControl   = "control"
	opDelivered = "delivered"
	opApplied   = "applied"
)

// Control kinds.
const (
	ControlPause  = "pause"
	ControlResume = "resume"
	ControlCancel = "cancel"
	ControlBudget = "budget"
)

// MaxText bounds a message's text, so one line stays one reasonable write.
const MaxText = 256 << 10

// command is one line of either file.
type command struct {
	Op     string            `json:"op"`
	ID     string            `json:"id,omitempty"`
	Text   string            `json:"text,omitempty"`
	Class  Class             `json:"class,omitempty"`
	Kind   string            `json:"kind,omitempty"`
	Args   map[string]string `json:"args,omitempty"`
	Seq    int64             `json:"seq,omitempty"`
	Time   time.Time         `json:"time"`
	Sender string            `json:"sender,omitempty"`
}

// parseLine decodes and validates one line (without its newline).
func parseLine(b []byte) (command, error) {
	var c command
	if err := json.Unmarshal(b, &c); err != nil {
		return command{}, err
	}
	var err error
	switch c.Op {
	case opSay:
		if strings.TrimSpace(c.Text) == "" {
			err = errors.New("say without text")
		}
	case opUpdate:
		if _, ok := idNumber(c.ID, 'M'); !ok || strings.TrimSpace(c.Text) == "" {
			err = errors.New("update needs a message id and text")
		}
	case opWithdraw, opDelivered:
		if _, ok := idNumber(c.ID, 'M'); !ok {
			err = fmt.Errorf("%s needs a message id", c.Op)
		}
	case opApplied:
		if _, ok := idNumber(c.ID, 'C'); !ok {
			err = errors.New("applied needs a control id")
		}
	case opControl:
		if !validKind(c.Kind) {
			err = fmt.Errorf("unknown control kind %q", c.Kind)
		}
	default:
		err = fmt.Errorf("unknown op %q", c.Op)
	}
	if (c.Op == opDelivered || c.Op == opApplied) && c.Seq < 0 {
		err = errors.New("negative seq")
	}
	return c, err
}

func encodeLine(c command) []byte {
	b, err := json.Marshal(c)
	if err != nil { // only strings, ints and a time: cannot fail
		panic(fmt.Sprintf("inbox: encode line: %v", err))
	}
	return append(b, '\n')
}

func validKind(k string) bool {
	switch k {
	case ControlPause, ControlResume, ControlCancel, ControlBudget:
		return true
	}
	return false
}

// idNumber parses "M12" (prefix p) into 12.
func idNumber(id string, p byte) (int, bool) {
	if len(id) < 2 || id[0] != p || id[1] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(id[1:])
	if err != nil || n <= 0 || strconv.Itoa(n) != id[1:] {
		return 0, false
	}
	return n, true
}

// tail reads a JSON Lines file incrementally: complete lines only, from the
// offset where the previous read stopped.
type tail struct {
	path string
	off  int64 // end of the last complete line consumed
	size int64 // file size at the last read (includes a torn tail)
}

// read calls fn for each complete, non-blank line after t.off.
// An unchanged size means nothing was appended (the files are append-only):
// then the file is not opened, which is what every agent step sees.
func (t *tail) read(fn func(line []byte)) error {
	if fi, err := os.Stat(t.path); err == nil && fi.Size() == t.size {
		return nil
	}
	f, err := os.Open(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inbox: open %s: %w", t.path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, t.off, 1<<62))
	if err != nil {
		return fmt.Errorf("inbox: read %s: %w", t.path, err)
	}
	t.size = t.off + int64(len(data))
	t.off += scanLines(data, fn)
	return nil
}

// torn reports whether the file ended in an incomplete line at the last read.
func (t *tail) torn() bool { return t.size > t.off }

// scanLines calls fn for each complete non-blank line of data and returns
// the number of bytes consumed (through the last newline).
func scanLines(data []byte, fn func(line []byte)) int64 {
	var n int64
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return n
		}
		if line := bytes.TrimSpace(data[:i]); len(line) > 0 {
			fn(line)
		}
		data = data[i+1:]
		n += int64(i + 1)
	}
}

// book is the fold of both files: the state every reader derives.
type book struct {
	msgs      []*Message // msgs[i] has id M(i+1)
	ctrls     []ControlCommand
	delivered map[string]command // first delivered mark per message id
	applied   map[string]command
	bad       int // complete lines that did not parse or did not apply
}

func newBook() *book {
	return &book{delivered: map[string]command{}, applied: map[string]command{}}
}

// inboxLine folds one line of inbox.jsonl.
func (b *book) inboxLine(line []byte) {
	c, err := parseLine(line)
	if err != nil {
		b.bad++
		return
	}
	c.Time = c.Time.UTC()
	switch c.Op {
	case opSay:
		class := c.Class
		if !class.Valid() {
			class = Classify(c.Text)
		}
		b.msgs = append(b.msgs, &Message{
			ID: "M" + strconv.Itoa(len(b.msgs)+1), Text: c.Text, Original: c.Text,
			State: StateQueued, Class: class, Sender: c.Sender, Sent: c.Time,
		})
	case opUpdate, opWithdraw:
		m := b.message(c.ID)
		if m == nil || m.State == StateWithdrawn {
			b.bad++
			return
		}
		if c.Op == opWithdraw {
			m.State = StateWithdrawn
			return
		}
		m.Text, m.State, m.Updates = c.Text, StateUpdated, m.Updates+1
		m.Class = c.Class
		if !m.Class.Valid() {
			m.Class = Classify(c.Text)
		}
	case opControl:
		b.ctrls = append(b.ctrls, ControlCommand{
			ID: "C" + strconv.Itoa(len(b.ctrls)+1), Kind: c.Kind, Args: c.Args,
			Sender: c.Sender, Time: c.Time,
		})
	default:
		b.bad++
	}
}

// stateLine folds one line of inbox-state.jsonl.
func (b *book) stateLine(line []byte) {
	c, err := parseLine(line)
	if err != nil {
		b.bad++
		return
	}
	c.Time = c.Time.UTC()
	switch c.Op {
	case opDelivered:
		if _, ok := b.delivered[c.ID]; !ok {
			b.delivered[c.ID] = c
		}
	case opApplied:
		if _, ok := b.applied[c.ID]; !ok {
			b.applied[c.ID] = c
		}
	default:
		b.bad++
	}
}

func (b *book) message(id string) *Message {
	n, ok := idNumber(id, 'M')
	if !ok || n > len(b.msgs) {
		return nil
	}
	return b.msgs[n-1]
}

// view is message m as the protocol sees it: a delivered mark wins over
// anything the inbox file says.
func (b *book) view(m *Message) Message {
	v := *m
	if d, ok := b.delivered[m.ID]; ok {
		v.State, v.Seq, v.Delivered = StateDelivered, d.Seq, d.Time
	}
	return v
}
