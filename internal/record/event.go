package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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

// Parse reads events from r (see Read and Scanner).
func Parse(r io.Reader) (Contents, error) {
	var c Contents
	sc := NewScanner(r)
	for sc.Next() {
		c.Events = append(c.Events, sc.Event())
	}
	c.TornTail = sc.TornTail()
	return c, sc.Err()
}

// encodeLine renders the envelope fields first, then the payload's members
// (body, see payloadBody) as they are.
func encodeLine(seq int64, t time.Time, typ, agent string, body []byte) []byte {
	b := make([]byte, 0, 96+len(typ)+len(agent)+len(body))
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"time":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano) // digits, letters and punctuation json needs not escape
	b = append(b, `","type":`...)
	b = appendString(b, typ)
	b = append(b, `,"agent":`...)
	b = appendString(b, agent)
	if len(body) > 0 {
		b = append(b, ',')
		b = append(b, body...)
	}
	return append(b, "}\n"...)
}

// appendString appends s as json.Marshal renders it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
