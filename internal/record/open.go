package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Open reopens an existing run's log for appending, as a resume does. A torn
// last line (the process was killed mid-write) is cut off first, so the log
// again holds only complete events; repaired reports whether that happened.
// Appends continue the seq where the log ends.
func Open(dir string, now func() time.Time) (l *Log, c Contents, repaired bool, err error) {
	path := filepath.Join(dir, EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, c, false, fmt.Errorf("record: open event log: %w", err)
	}
	c, err = Parse(bytes.NewReader(data))
	if err != nil {
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
	l = &Log{dir: dir, now: now, f: f}
	if n := len(c.Events); n > 0 {
		l.seq = c.Events[n-1].Seq
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

// First reads only the first event of a run's log.
func First(dir string) (Event, error) {
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		return Event{}, fmt.Errorf("record: open event log: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 1<<16).ReadBytes('\n')
	if len(line) == 0 {
		return Event{}, fmt.Errorf("record: empty event log: %v", err)
	}
	return decodeLine(bytes.TrimSpace(line))
}

// Last reads only the last complete event of a run's log (a torn tail is
// skipped), reading the file from its end.
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
		lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
		for i := len(lines) - 1; i >= 0; i-- {
			if i == 0 && off > 0 {
				break // may be cut: read more
			}
			if e, err := decodeLine(lines[i]); err == nil {
				return e, nil
			}
		}
		if off == 0 {
			return Event{}, fmt.Errorf("record: no complete event in the log")
		}
	}
}

func decodeLine(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil || e.Seq == 0 || e.Type == "" {
		return Event{}, fmt.Errorf("record: bad event line")
	}
	e.Raw = append(json.RawMessage(nil), line...)
	return e, nil
}
