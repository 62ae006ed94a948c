package eventlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// The record's integrity: a hash chain over its lines and a head file.
//
// Every line this version writes carries "prev", the sha256 of the
// previous line's bytes (without its newline; for the first line, of
// nothing), so a line edited, removed or inserted by hand breaks the chain
// at the next line. The last line has no next line: events.head names the
// seq and hash of the last line the writer made durable (rewritten after
// every Sync, after the events file's fsync, so it never names a line a
// crash could lose), which catches a changed last line and a record cut
// short (a dropped run_finished). A torn last line is not a break: it was
// never synced, a resume cuts it as before.
//
// What it does not prove: no key is involved, so whoever can write the run
// directory can recompute every prev and the head (Reseal does exactly
// that); the chain tells a record changed by hand or by a tool that does
// not know it from one apodex wrote, and names where. A record written
// before the chain (no prev) reads as before, unchecked; one resumed by
// this version is chained from the resumed event on.

// HeadFile is the head of the record, beside EventsFile.
const HeadFile = "events.head"

// headLen is the head's fixed length: "<seq, 20 digits> sha256:<hex>\n",
// so rewriting it in place never leaves an old tail behind.
const headLen = 20 + 1 + 7 + 64 + 1

// genesis is the prev of the first line: the hash of nothing.
var genesis = sha256.Sum256(nil)

// lineHash is the hash a line is chained by: sha256 of its bytes without
// the newline (and without white space around them, which a reader
// ignores; apodex writes none).
func lineHash(line []byte) [sha256.Size]byte { return sha256.Sum256(bytes.TrimSpace(line)) }

func hashRef(sum [sha256.Size]byte) string { return "sha256:" + hex.EncodeToString(sum[:]) }

// ErrTampered: the record is not as apodex wrote it.
var ErrTampered = errors.New("record: the record was changed after it was written")

// IntegrityError names where a record's chain or head does not hold.
type IntegrityError struct {
	Seq    int64  `json:"seq"`  // the first event that fails (for a cut record: the first one missing)
	Line   int    `json:"line"` // its line in events.jsonl
	Reason string `json:"reason"`
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("%v: line %d (seq %d): %s", ErrTampered, e.Line, e.Seq, e.Reason)
}

func (e *IntegrityError) Unwrap() error { return ErrTampered }

// Head is what events.head says: the last event the writer made durable.
type Head struct {
	Seq  int64
	Hash string // "sha256:<hex>" of that event's line
	// Missing: the run directory has no head (a record written before it
	// existed, or one whose head was removed).
	Missing bool
}

var headPattern = regexp.MustCompile(`^([0-9]{20}) (sha256:[0-9a-f]{64})\n$`)

// ReadHead reads the head of the run in dir. A missing head is not an
// error (Head.Missing); an unreadable one is.
func ReadHead(dir string) (Head, error) {
	b, err := os.ReadFile(filepath.Join(dir, HeadFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Head{Missing: true}, nil
	}
	if err != nil {
		return Head{}, fmt.Errorf("record: read %s: %w", HeadFile, err)
	}
	m := headPattern.FindSubmatch(b)
	if m == nil {
		return Head{}, fmt.Errorf("%w: %s is garbled (%d bytes; want %q)", ErrTampered, HeadFile, len(b), "<seq> sha256:<hex>")
	}
	seq, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return Head{Seq: seq, Hash: string(m[2])}, nil
}

func encodeHead(seq int64, sum [sha256.Size]byte) []byte {
	return fmt.Appendf(nil, "%020d %s\n", seq, hashRef(sum))
}

// writeHead writes the head of dir in place (creating it).
func writeHead(dir string, seq int64, sum [sha256.Size]byte) error {
	f, err := os.OpenFile(filepath.Join(dir, HeadFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(encodeHead(seq, sum), 0)
	return errors.Join(err, f.Truncate(headLen), f.Close())
}

// Integrity is what a scan of the whole record found about its chain and
// head.
type Integrity struct {
	// Chained: some line carries prev; From is the first such seq (1 for a
	// record this version began; later for an older record it resumed,
	// whose earlier lines are not covered).
	Chained bool  `json:"chained"`
	From    int64 `json:"from,omitempty"`
	// Head is the head as read (Head.Missing when there is none); HeadSeq
	// repeats its seq for the JSON view.
	Head    Head  `json:"-"`
	HeadSeq int64 `json:"head_seq"`
	// Err is the first problem in seq order; nil when the record is intact
	// or not chained (unchecked).
	Err *IntegrityError `json:"error,omitempty"`
}

// Check is Err as an error (nil when there is none).
func (i Integrity) Check() error {
	if i.Err == nil {
		return nil
	}
	return i.Err
}

// chain follows a scan: every line's hash, the chain and the head.
type chain struct {
	prev     [sha256.Size]byte // hash of the previous event line
	known    bool              // prev is known (false when a scan starts mid-record)
	prevLine int
	lastSeq  int64
	head     *Head // nil: not checked
	headSeen bool
	out      Integrity
}

func newChain(known bool) chain { return chain{prev: genesis, known: known} }

func (c *chain) fail(seq int64, line int, format string, a ...any) {
	if c.out.Err == nil {
		c.out.Err = &IntegrityError{Seq: seq, Line: line, Reason: fmt.Sprintf(format, a...)}
	}
}

// step takes the next event line (trimmed) of the scan.
func (c *chain) step(e *Event, line []byte, lineNo int) {
	sum := lineHash(line)
	switch {
	case e.Prev != "":
		if !c.out.Chained {
			c.out.Chained, c.out.From = true, e.Seq
		}
		if c.known && e.Prev != hashRef(c.prev) {
			if c.prevLine == 0 {
				c.fail(e.Seq, lineNo, "its prev is not the hash of an empty line, as the first line's must be: the record's beginning was changed")
			} else {
				c.fail(e.Seq, lineNo, "its prev is not the hash of line %d (seq %d): seq %d was edited, or lines were removed or inserted before seq %d", c.prevLine, e.Seq-1, e.Seq-1, e.Seq)
			}
		}
	case c.out.Chained:
		c.fail(e.Seq, lineNo, "it has no prev, but the hash chain began at seq %d: apodex did not write this line", c.out.From)
	}
	if c.head != nil && e.Seq == c.head.Seq {
		c.headSeen = true
		if hashRef(sum) != c.head.Hash {
			c.fail(e.Seq, lineNo, "it is not the line apodex wrote (%s holds another hash for seq %d)", HeadFile, e.Seq)
		}
	}
	c.prev, c.known, c.prevLine, c.lastSeq = sum, true, lineNo, e.Seq
}

// end closes a scan that read the whole record without error.
func (c *chain) end() {
	h := c.head
	if h == nil {
		return
	}
	c.out.Head, c.out.HeadSeq = *h, h.Seq
	switch {
	case h.Missing:
		if c.out.Chained {
			c.fail(c.lastSeq, c.prevLine, "%s is missing, but the record is hash-chained from seq %d: its end cannot be checked", HeadFile, c.out.From)
		}
	case h.Seq > c.lastSeq:
		c.fail(c.lastSeq+1, c.prevLine+1, "the record ends at seq %d, but %s says seq %d was written: seq %d to %d were removed (a record cut short, e.g. its run_finished dropped)", c.lastSeq, HeadFile, h.Seq, c.lastSeq+1, h.Seq)
	}
}

// Cut leaves the record of the run in dir as a kill after its first n
// lines would have: the lines after them are removed and the head names
// the last event kept. Replay plays a recorded stop this way.
func Cut(dir string, n int) error {
	path := filepath.Join(dir, EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("record: cut: %w", err)
	}
	off := 0
	for range n {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	if err := os.Truncate(path, int64(off)); err != nil {
		return fmt.Errorf("record: cut: %w", err)
	}
	return sealEnd(dir, data[:off])
}

// sealEnd writes the head for the record data (complete lines).
func sealEnd(dir string, data []byte) error {
	c, err := Parse(bytes.NewReader(data))
	if err != nil {
		return err
	}
	seq, sum := int64(0), genesis
	if n := len(c.Events); n > 0 {
		seq, sum = c.Events[n-1].Seq, lineHash(c.Events[n-1].Raw)
	}
	if err := writeHead(dir, seq, sum); err != nil {
		return fmt.Errorf("record: write %s: %w", HeadFile, err)
	}
	return nil
}

var prevField = regexp.MustCompile(`,"prev":"sha256:[0-9a-f]{64}"`)

// Reseal recomputes every prev of the record of the run in dir, and its
// head, so that the lines it holds now form an intact chain again. It is
// for tests and tools that rewrite a record on purpose, and it shows the
// chain's limit: no key is involved, anyone who can write the run
// directory can do the same.
func Reseal(dir string) error {
	path := filepath.Join(dir, EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("record: reseal: %w", err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	prev := genesis
	var out []byte
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			out = append(out, l...)
			continue
		}
		if loc := prevField.FindIndex(l); loc != nil {
			l = append(append(append([]byte(nil), l[:loc[0]]...), `,"prev":"`+hashRef(prev)+`"`...), l[loc[1]:]...)
		}
		prev = lineHash(l)
		out = append(out, l...)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("record: reseal: %w", err)
	}
	return sealEnd(dir, out[:bytes.LastIndexByte(out, '\n')+1])
}
