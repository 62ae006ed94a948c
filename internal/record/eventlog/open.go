package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Open reopens an existing run's log for appending, as a resume does. A torn
// last line (the process was killed mid-write) is cut off first, so the log
// again holds only complete events; repaired reports whether that happened.
// A record whose hash chain or head does not hold is refused (an
// *IntegrityError naming the first bad seq and its line) before anything
// is written. Appends continue the seq, and the chain, where the log ends.
func Open(dir string, now func() time.Time) (l *Log, c Contents, repaired bool, err error) {
	path := filepath.Join(dir, EventsFile)
	head, err := ReadHead(dir)
	if err != nil {
		return nil, c, false, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, c, false, fmt.Errorf("record: open event log: %w", err)
	}
	sc := NewScanner(bytes.NewReader(data))
	sc.SetHead(head)
	c, err = scanAll(sc)
	if err != nil {
		return nil, c, false, err
	}
	if err := c.Integrity.Check(); err != nil {
		return nil, c, false, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		repaired = true
		if c.TornTail { // cut the fragment
			err = os.Truncate(path, completeLength(data))
		} else { // a whole event whose newline was lost: end it
			err = appendNewline(path)
		}
		if err != nil {
			return nil, c, false, fmt.Errorf("record: repair torn last line: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, BlobsDir), 0o755); err != nil {
		return nil, c, false, fmt.Errorf("record: blobs: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, c, false, fmt.Errorf("record: open event log: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	l = &Log{dir: dir, now: now, f: f, last: genesis}
	if n := len(c.Events); n > 0 {
		l.seq, l.last = c.Events[n-1].Seq, lineHash(c.Events[n-1].Raw)
	}
	if err := l.openHead(); err != nil {
		f.Close()
		return nil, c, false, err
	}
	c.TornTail = false // repaired
	return l, c, repaired, nil
}

// completeLength is the length of data up to and including its last newline.
func completeLength(data []byte) int64 {
	i := bytes.LastIndexByte(data, '\n')
	return int64(i + 1)
}

func appendNewline(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("\n")); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// First reads only the first event of a run's log. A garbled first line
// is an error naming it, as Scanner names any line.
func First(dir string) (Event, error) {
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		return Event{}, fmt.Errorf("record: open event log: %w", err)
	}
	defer f.Close()
	sc := NewScanner(f)
	if sc.Next() {
		return sc.Event(), nil
	}
	if err := sc.Err(); err != nil {
		return Event{}, err
	}
	if sc.TornTail() {
		return Event{}, fmt.Errorf("record: line 1 (seq 1 expected) is torn: the run's process stopped while writing its first event")
	}
	return Event{}, errors.New("record: empty event log")
}

// Last reads only the last complete event of a run's log (a torn tail is
// skipped), reading the file from its end. A complete last line that is
// garbled is an error naming its line.
func Last(dir string) (Event, error) {
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		return Event{}, fmt.Errorf("record: open event log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Event{}, err
	}
	for size := int64(64 << 10); ; size *= 4 {
		off := max(st.Size()-size, 0)
		buf := make([]byte, st.Size()-off)
		if _, err := f.ReadAt(buf, off); err != nil && len(buf) > 0 {
			return Event{}, err
		}
		complete := len(buf) > 0 && buf[len(buf)-1] == '\n'
		lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
		for i := len(lines) - 1; i >= 0; i-- {
			if i == 0 && off > 0 {
				break // may be cut: read more
			}
			e, err := decodeLine(lines[i])
			if err == nil {
				return e, nil
			}
			if i < len(lines)-1 || complete { // not a torn tail: damage
				return Event{}, fmt.Errorf("record: line %d (the last complete one) is garbled: %w", lineNumber(f, off, buf, i), err)
			}
		}
		if off == 0 {
			return Event{}, fmt.Errorf("record: no complete event in the log")
		}
	}
}

// lineNumber is the line number of the i-th line of buf, read from off.
func lineNumber(f *os.File, off int64, buf []byte, i int) int {
	n := 1 + i
	if off > 0 {
		before := make([]byte, off)
		f.ReadAt(before, 0)
		n += bytes.Count(before, []byte("\n"))
	}
	return n
}

func decodeLine(line []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(line, &e)
	if err == nil && (e.Seq == 0 || e.Type == "") {
		err = errors.New("missing seq or type")
	}
	if err != nil {
		return Event{}, err
	}
	e.Raw = append(json.RawMessage(nil), line...)
	return e, nil
}
