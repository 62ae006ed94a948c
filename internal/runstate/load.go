package runstate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Loaded is a run's state as read from its directory.
type Loaded struct {
	*State
	Dir string
	// Events counts the complete events read; TornTail says the last line
	// was cut off (a crash mid-write) and skipped.
	Events   int
	TornTail bool
	// Warnings are what the reader skipped, for the user (an event type
	// this version does not know).
	Skipped []string
	// Integrity is what the record's hash chain and head said when Load
	// read it whole (Refresh does not recheck).
	Integrity record.Integrity

	// BytesRead counts the bytes of events.jsonl read by Load and every
	// Refresh since: what keeping the state live costs.
	BytesRead int64

	// off is where the events read so far end in events.jsonl; -1 when
	// that is not known (a torn tail, an error): Refresh then reads it all.
	off int64
	// each is called with every event folded (LoadEach).
	each func(record.Event)
}

// Load folds the record of the run in dir, streaming it (one line at a
// time). A garbled line, a seq gap, a line over record.MaxLine or a payload
// that does not decode is an error naming the line or seq; events of an
// unknown type are skipped with a warning in Skipped.
func Load(dir string) (*Loaded, error) { return LoadEach(dir, nil) }

// LoadEach is Load that also calls each (when not nil) with every event it
// folds, then with every event a Refresh folds: a reader that keeps more
// than the state (the web page's transcript) keeps it in step. After a
// reload (see Refresh) each sees events again from seq 1.
func LoadEach(dir string, each func(record.Event)) (*Loaded, error) {
	head, err := record.ReadHead(dir) // before the events: it never names more than they hold
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return nil, fmt.Errorf("runstate: open the record: %w", err)
	}
	defer f.Close()
	cr := &countingReader{r: f}
	sc := record.NewScanner(cr)
	sc.SetHead(head)
	l, err := fold(sc, each)
	if l != nil {
		l.Dir = dir
		l.BytesRead = cr.n
		if l.RunID == "" {
			l.RunID = filepath.Base(dir)
		}
		l.off = -1
		if err == nil && !l.TornTail {
			l.off = cr.n // read to the end, every line complete
		}
	}
	return l, err
}

// Refresh folds the events appended to the record of a Loaded since Load
// (or the last Refresh), reading only those; it is what Load would return
// now. After a torn tail or an error, or when the record is shorter than
// what was read (replaced), it loads the whole record again.
func (l *Loaded) Refresh() error {
	if l.off < 0 || l.Dir == "" {
		if l.Dir == "" {
			return errors.New("runstate: Refresh needs a state from Load")
		}
		read := l.BytesRead
		nl, err := LoadEach(l.Dir, l.each)
		if nl != nil {
			*l = *nl
			l.BytesRead += read
		}
		return err
	}
	f, err := os.Open(filepath.Join(l.Dir, record.EventsFile))
	if err != nil {
		return fmt.Errorf("runstate: open the record: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() < l.off {
		l.off = -1 // shorter than what was read: not the record read; read it again
		return l.Refresh()
	}
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return fmt.Errorf("runstate: read the record: %w", err)
	}
	cr := &countingReader{r: f}
	sc := record.NewScannerAfter(cr, l.Seq)
	defer func() { l.BytesRead += cr.n }()
	for sc.Next() {
		e := sc.Event()
		if err := l.Apply(e); err != nil {
			l.off = -1
			return err
		}
		l.Events++
		if l.each != nil {
			l.each(e)
		}
	}
	l.TornTail = sc.TornTail()
	l.Skipped = l.Skipped[:0]
	for _, u := range l.Unknown {
		l.Skipped = append(l.Skipped, skippedNote(u))
	}
	if err := sc.Err(); err != nil || l.TornTail {
		l.off = -1
		return err
	}
	l.off += cr.n
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Read folds the events of r (see Load); on error it returns the state so
// far with the error.
func Read(r io.Reader) (*Loaded, error) { return fold(record.NewScanner(r), nil) }

func fold(sc *record.Scanner, each func(record.Event)) (*Loaded, error) {
	l := &Loaded{State: New(), off: -1, each: each}
	for sc.Next() {
		e := sc.Event()
		if err := l.Apply(e); err != nil {
			return l, err
		}
		l.Events++
		if each != nil {
			each(e)
		}
	}
	l.TornTail = sc.TornTail()
	l.Integrity = sc.Integrity()
	for _, u := range l.Unknown {
		l.Skipped = append(l.Skipped, skippedNote(u))
	}
	return l, sc.Err()
}

func skippedNote(u Unknown) string {
	return fmt.Sprintf("skipped event seq %d of type %q, unknown to this version of apodex (written by a newer one?)", u.Seq, u.Type)
}

// CheckResumable returns an error naming the first event this version does
// not know: resuming past it could lose what it recorded.
func (s *State) CheckResumable() error {
	if len(s.Unknown) == 0 {
		return nil
	}
	u := s.Unknown[0]
	return fmt.Errorf("the record holds an event of type %q (seq %d) that this version of apodex does not know; resume it with the version that wrote it", u.Type, u.Seq)
}

func addUsage(sum, u llm.Usage, first bool) llm.Usage {
	out := sum.Add(u)
	if first {
		out.Reported = u.Reported
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
