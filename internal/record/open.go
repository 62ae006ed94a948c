package record

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Open reopens an existing run's log for appending, as a resume does. A torn
// last line (the process was killed mid-write) is cut off first, so the log
// again holds only complete events; repaired reports whether that happened.
// Appends continue the seq where the log ends.
func Open(dir string, now func() time.Time) (l *Log, repaired bool, err error) {
	path := filepath.Join(dir, EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("record: open event log: %w", err)
	}
	c, err := Parse(bytes.NewReader(data))
	if err != nil {
		return nil, false, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		repaired = true
		if c.TornTail { // cut the fragment
			err = os.Truncate(path, completeLength(data))
		} else { // a whole event whose newline was lost: end it
			err = appendNewline(path)
		}
		if err != nil {
			return nil, false, fmt.Errorf("record: repair torn last line: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, BlobsDir), 0o755); err != nil {
		return nil, false, fmt.Errorf("record: blobs: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("record: open event log: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	l = &Log{dir: dir, now: now, f: f}
	if n := len(c.Events); n > 0 {
		l.seq = c.Events[n-1].Seq
	}
	return l, repaired, nil
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
