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
