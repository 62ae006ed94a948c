package eventlog

import (
	"encoding/hex"
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
	// Prev is the hash of the line before ("sha256:<hex>", see chain.go);
	// "" in a record written before the chain.
	Prev string `json:"prev,omitempty"`
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
	// Integrity is what the hash chain and the head say (Read checks the
	// head; Parse, without a directory, only the chain).
	Integrity Integrity
}

// ErrGap: the log's seq numbers are not 1, 2, 3, ….
var ErrGap = errors.New("record: seq gap or duplicate in event log")

// Read reads a run directory's events. A torn last line is skipped and
// reported; a bad line anywhere else is an error. The hash chain and the
// head are checked and reported in Contents.Integrity, not as an error
// (ReadChecked refuses a record that fails them).
func Read(dir string) (Contents, error) {
	head, err := ReadHead(dir)
	if err != nil {
		return Contents{}, err
	}
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		return Contents{}, fmt.Errorf("record: open event log: %w", err)
	}
	defer f.Close()
	sc := NewScanner(f)
	sc.SetHead(head)
	return scanAll(sc)
}

// ReadChecked is Read for a reader that acts on the record (resume, replay,
// export): a record whose hash chain or head does not hold is refused with
// an *IntegrityError naming the first bad seq and its line. A record
// without a chain (written before it) is read unchecked.
func ReadChecked(dir string) (Contents, error) {
	c, err := Read(dir)
	if err == nil {
		err = c.Integrity.Check()
	}
	return c, err
}

// Parse reads events from r (see Read and Scanner); it checks the chain
// but not the head.
func Parse(r io.Reader) (Contents, error) {
	return scanAll(NewScanner(r))
}

func scanAll(sc *Scanner) (Contents, error) {
	var c Contents
	for sc.Next() {
		c.Events = append(c.Events, sc.Event())
	}
	c.TornTail = sc.TornTail()
	c.Integrity = sc.Integrity()
	return c, sc.Err()
}

// encodeLine renders the envelope fields first (prev, the previous line's
// hash, last), then the payload's members (body, see payloadBody) as they
// are.
func encodeLine(seq int64, t time.Time, typ, agent string, prev [32]byte, body []byte) []byte {
	b := make([]byte, 0, 176+len(typ)+len(agent)+len(body))
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"time":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano) // digits, letters and punctuation json needs not escape
	b = append(b, `","type":`...)
	b = appendString(b, typ)
	b = append(b, `,"agent":`...)
	b = appendString(b, agent)
	b = append(b, `,"prev":"sha256:`...)
	b = hex.AppendEncode(b, prev[:])
	b = append(b, '"')
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
