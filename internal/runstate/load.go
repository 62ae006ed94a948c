package runstate

import (
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
}

// Load folds the record of the run in dir, streaming it (one line at a
// time). A garbled line, a seq gap, a line over record.MaxLine or a payload
// that does not decode is an error naming the line or seq; events of an
// unknown type are skipped with a warning in Skipped.
func Load(dir string) (*Loaded, error) {
	f, err := os.Open(filepath.Join(dir, record.EventsFile))
	if err != nil {
		return nil, fmt.Errorf("runstate: open the record: %w", err)
	}
	defer f.Close()
	l, err := Read(f)
	if l != nil {
		l.Dir = dir
		if l.RunID == "" {
			l.RunID = filepath.Base(dir)
		}
	}
	return l, err
}

// Read folds the events of r (see Load); on error it returns the state so
// far with the error.
func Read(r io.Reader) (*Loaded, error) {
	l := &Loaded{State: New()}
	sc := record.NewScanner(r)
	for sc.Next() {
		if err := l.Apply(sc.Event()); err != nil {
			return l, err
		}
		l.Events++
	}
	l.TornTail = sc.TornTail()
	for _, u := range l.Unknown {
		l.Skipped = append(l.Skipped, fmt.Sprintf("skipped event seq %d of type %q, unknown to this version of apodex (written by a newer one?)", u.Seq, u.Type))
	}
	return l, sc.Err()
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
