package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLine caps one line of events.jsonl (16 MiB, four times the request of a model with a million-token window). Append refuses a longer
// event and every reader refuses a longer line, naming it, so that reading a
// record needs memory for one line at most, whatever the file holds.
const MaxLine = 16 << 20

// ErrLineTooLong: a record line is longer than MaxLine.
var ErrLineTooLong = errors.New("record: line longer than the cap of 16 MiB")

// Scanner reads events one line at a time, holding only the current line.
// Seq numbers must run 1, 2, 3, … (ErrGap otherwise); a torn last line is
// skipped and reported by TornTail; a bad line anywhere else stops the scan
// with an error naming its line number and the seq it should have had.
//
// It follows the hash chain (chain.go) as it goes; Integrity reports it
// once the scan is over. A break does not stop the scan.
type Scanner struct {
	br    *bufio.Reader
	line  int
	seq   int64
	ev    Event
	err   error
	torn  bool
	done  bool
	chain chain
	buf   []byte // the line being read, reused from line to line
}

// NewScanner reads the events of r, a whole events.jsonl.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{br: bufio.NewReaderSize(r, 1<<16), chain: newChain(true)}
}

// NewScannerAfter reads the rest of an events.jsonl from just after the
// event seq: its first event must be seq+1. Its first line's prev cannot
// be checked (the line before it is not read).
func NewScannerAfter(r io.Reader, seq int64) *Scanner {
	s := NewScanner(r)
	s.seq = seq
	s.chain = newChain(false)
	return s
}

// SetHead has the scan check the record against its head (ReadHead):
// the line at the head's seq must have its hash, and the record must not
// end before it. Call it before the first Next.
func (s *Scanner) SetHead(h Head) { s.chain.head = &h }

// Integrity is what the scan found about the hash chain and the head
// (the head only when SetHead was called and the scan read to the end
// without error).
func (s *Scanner) Integrity() Integrity { return s.chain.out }

// Next advances to the next event; it returns false at the end or on error.
func (s *Scanner) Next() bool {
	for !s.done {
		s.line++
		line, complete, err := s.readLine()
		if err != nil {
			s.err, s.done = err, true
			return false
		}
		if line == nil {
			s.done = true
			s.chain.end()
			return false
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e Event
		if jerr := json.Unmarshal(line, &e); jerr != nil || e.Seq == 0 || e.Type == "" {
			if !complete {
				s.torn, s.done = true, true
				s.chain.end()
				return false
			}
			if jerr == nil {
				jerr = errors.New("missing seq or type")
			}
			s.err, s.done = fmt.Errorf("record: line %d (seq %d expected) is garbled: %w", s.line, s.seq+1, jerr), true
			return false
		}
		if e.Seq != s.seq+1 {
			s.err, s.done = fmt.Errorf("%w: line %d has seq %d, want %d", ErrGap, s.line, e.Seq, s.seq+1), true
			return false
		}
		s.seq = e.Seq
		e.Raw = append(json.RawMessage(nil), line...)
		s.chain.step(&e, line, s.line)
		s.ev = e
		if !complete {
			s.done = true // a whole event whose newline was lost ends the file
			s.chain.end()
		}
		return true
	}
	return false
}

// readLine returns the next line (nil at the end) and whether it ended
// with a newline. A line over MaxLine is an error; the rest of it is not
// read into memory.
func (s *Scanner) readLine() ([]byte, bool, error) {
	buf := s.buf[:0] // reused: Next keeps a copy of the line (Raw), never buf
	defer func() { s.buf = buf }()
	for {
		chunk, err := s.br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLine {
			return nil, false, fmt.Errorf("%w: line %d (seq %d expected); the record was not written by apodex or is damaged: move it aside, or cut that line out (the run cannot resume past it)", ErrLineTooLong, s.line, s.seq+1)
		}
		if cap(buf)-len(buf) < len(chunk) { // grow by doubling: a long line costs twice its size, not five times
			grown := make([]byte, len(buf), min(max(2*cap(buf), len(buf)+len(chunk), 4096), MaxLine))
			copy(grown, buf)
			buf = grown
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(buf) == 0 {
				return nil, false, nil
			}
			return buf, false, nil
		default:
			return nil, false, fmt.Errorf("record: read event log: %w", err)
		}
	}
}

// Event is the current event.
func (s *Scanner) Event() Event { return s.ev }

// Err is the error that stopped the scan, if any.
func (s *Scanner) Err() error { return s.err }

// TornTail reports whether the last line was incomplete (a crash mid-write);
// it was not returned.
func (s *Scanner) TornTail() bool { return s.torn }

// Line is the line number of the current event.
func (s *Scanner) Line() int { return s.line }
