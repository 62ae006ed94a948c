package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Event is one line of events.jsonl as read back.
type Event struct {
	Seq   int64     `json:"seq"`
	Time  time.Time `json:"time"`
	Type  string    `json:"type"`
	Agent string    `json:"agent,omitempty"`
	// Raw is the whole line; Decode reads the payload fields from it.
	Raw json.RawMessage `json:"-"`
}

// Decode unmarshals the event's payload fields into v.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Raw, v); err != nil {
		return fmt.Errorf("record: decode %s event seq %d: %w", e.Type, e.Seq, err)
	}
	return nil
}

// Log contents as read by Read.
type Contents struct {
	Events []Event
	// TornTail is true when the last line was incomplete (a crash mid-write);
	// it is not in Events.
	TornTail bool
}

// ErrGap: the log's seq numbers are not 1, 2, 3, ….
var ErrGap = errors.New("record: seq gap or duplicate in event log")

// Read reads a run directory's events. A torn last line is skipped and
// reported; a bad line anywhere else is an error.
func Read(dir string) (Contents, error) {
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		return Contents{}, fmt.Errorf("record: open event log: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads events from r (see Read).
func Parse(r io.Reader) (Contents, error) {
	var c Contents
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return c, nil
		}
		if err != nil && err != io.EOF {
			return c, fmt.Errorf("record: read event log: %w", err)
		}
		complete := bytes.HasSuffix(line, []byte("\n"))
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e Event
		if jerr := json.Unmarshal(line, &e); jerr != nil || e.Seq == 0 || e.Type == "" {
			if !complete {
				c.TornTail = true
				return c, nil
			}
			if jerr == nil {
				jerr = errors.New("missing seq or type")
			}
			return c, fmt.Errorf("record: line %d: %w", n, jerr)
		}
		if e.Seq != int64(len(c.Events))+1 {
			return c, fmt.Errorf("%w: line %d has seq %d, want %d", ErrGap, n, e.Seq, len(c.Events)+1)
		}
		e.Raw = append(json.RawMessage(nil), line...)
		c.Events = append(c.Events, e)
		if err == io.EOF {
			return c, nil
		}
	}
}

// encodeLine renders the envelope fields first, then payload fields in key
// order, so that the same event always has the same bytes.
func encodeLine(seq int64, t time.Time, typ, agent string, fields map[string]json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(128)
	fmt.Fprintf(&b, `{"seq":%d,"time":`, seq)
	ts, _ := json.Marshal(t.UTC().Format(time.RFC3339Nano))
	b.Write(ts)
	b.WriteString(`,"type":`)
	tb, _ := json.Marshal(typ)
	b.Write(tb)
	b.WriteString(`,"agent":`)
	ab, _ := json.Marshal(agent)
	b.Write(ab)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		b.WriteByte(',')
		b.Write(kb)
		b.WriteByte(':')
		b.Write(fields[k])
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}
