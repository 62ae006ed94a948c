// Package eventlog is the file behind a run's record: events.jsonl, its
// hash chain and head, the content-addressed blobs, and the readers,
// followers and subscribers of the log. It knows the envelope of an event
// (seq, time, type, agent, prev), never a payload: the event types and
// their payloads are package record's, whose names for all of this are the
// ones callers use.
//
// Guarantees:
//   - events.jsonl holds one JSON object per line with "seq" (1, 2, 3, … with
//     no gap and no duplicate, also across concurrent writers), "time",
//     "type" and "agent", in that order, then the event's payload fields at
//     the top level in the order the payload marshals them (a struct's field
//     order, a map's sorted keys), so the same event always has the same
//     bytes;
//   - after the envelope, "prev" holds the sha256 of the previous line
//     (of nothing, for the first), and events.head the seq and hash of the
//     last line made durable; readers check both and report the first line
//     that fails (chain.go says what that proves and what it does not);
//   - each event reaches the file in a single write, so a killed process
//     leaves at most one torn last line, which Read reports and skips;
//   - Sync makes every event and blob written so far durable (fsync); callers
//     call it at every step boundary, so a crash loses at most the step in
//     flight;
//   - a blob is stored once under blobs/<sha256 hex>, written atomically
//     (temporary file, fsync, then rename), and referenced as "sha256:<hex>";
//     ReadBlob reads one back without following a symbolic link (a blob
//     that is a link to a host file is refused, not read);
//   - Follow yields each event once, in seq order, as it lands, from
//     another process's writes too, by tailing the file; Log.Subscribe
//     does the same in the writing process without polling: Append hands
//     each event to every subscriber in memory, never waiting for one.
//
// The clock is injected so that a replay can reproduce times exactly.
package eventlog

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/apodex/apodex/internal/hostfs"
	"time"
)

// File names inside a run directory.
const (
	EventsFile = "events.jsonl"
	BlobsDir   = "blobs"
)

// ErrReservedField: a payload used one of the envelope's field names.
var ErrReservedField = errors.New("record: payload uses a reserved field (seq, time, type, agent, prev)")

// Log appends events to a run's events.jsonl. It is safe for concurrent use.
type Log struct {
	dir string
	now func() time.Time

	mu     sync.Mutex
	f      *os.File
	seq    int64
	last   [sha256.Size]byte          // hash of the last line written (the next prev)
	blobs  bool                       // blobs/ has entries not yet synced
	known  map[[sha256.Size]byte]bool // blobs stored or seen by this Log
	closed bool
	subs   map[*sub]struct{} // in-process subscribers (Subscribe)

	headMu  sync.Mutex
	head    *os.File // events.head, rewritten in place after each Sync
	headSeq int64    // the seq it names
}

// Create opens a new log in dir (creating dir, its events file and blobs/).
// It fails if the log already exists. now may be nil for time.Now.
func Create(dir string, now func() time.Time) (*Log, error) {
	if err := os.MkdirAll(filepath.Join(dir, BlobsDir), 0o755); err != nil {
		return nil, fmt.Errorf("record: create run directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("record: create event log: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	l := &Log{dir: dir, now: now, f: f, last: genesis}
	if err := l.openHead(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// openHead opens events.head and writes it for the log as it is.
func (l *Log) openHead() error {
	h, err := os.OpenFile(filepath.Join(l.dir, HeadFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err == nil {
		l.head, l.headSeq = h, -1
		err = l.writeHead(l.seq, l.last)
	}
	if err != nil {
		return fmt.Errorf("record: write %s: %w", HeadFile, err)
	}
	return h.Truncate(headLen)
}

// writeHead names seq (whose line hashes to sum) in the head, unless it
// already names a later one.
func (l *Log) writeHead(seq int64, sum [sha256.Size]byte) error {
	l.headMu.Lock()
	defer l.headMu.Unlock()
	if seq <= l.headSeq || l.head == nil {
		return nil
	}
	if _, err := l.head.WriteAt(encodeHead(seq, sum), 0); err != nil {
		return err
	}
	l.headSeq = seq
	return nil
}

// Dir is the run directory.
func (l *Log) Dir() string { return l.dir }

// Seq is the seq of the last event appended.
func (l *Log) Seq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Append writes one event. payload must marshal to a JSON object (or be nil)
// and must not use the envelope's field names.
func (l *Log) Append(typ, agent string, payload any) (int64, error) {
	body, err := payloadBody(payload)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("record: log is closed")
	}
	seq := l.seq + 1
	now := l.now()
	line := encodeLine(seq, now, typ, agent, l.last, body)
	if len(line) > MaxLine {
		return 0, fmt.Errorf("%w: a %s event of %d bytes was not recorded", ErrLineTooLong, typ, len(line))
	}
	if _, err := l.f.Write(line); err != nil {
		return 0, fmt.Errorf("record: append event: %w", err)
	}
	l.publish(seq, now, typ, agent, l.last, line)
	l.seq, l.last = seq, lineHash(line)
	return seq, nil
}

// PutBlob stores data by content and returns its reference "sha256:<hex>".
// The content is durable when PutBlob returns; its name is after the next
// Sync. Storing a blob again (the tool specs, every turn) costs a hash.
func (l *Log) PutBlob(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	ref := "sha256:" + name
	l.mu.Lock()
	known := l.known[sum]
	l.mu.Unlock()
	if known {
		return ref, nil
	}
	// Through a root at blobs/: a link planted there cannot move the write.
	root, err := os.OpenRoot(filepath.Join(l.dir, BlobsDir))
	if err != nil {
		return "", fmt.Errorf("record: store blob: %w", err)
	}
	defer root.Close()
	if _, err := root.Lstat(name); err == nil {
		l.remember(sum, false)
		return ref, nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmpName := ".tmp-" + hex.EncodeToString(rnd[:])
	tmp, err := root.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("record: store blob: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync() // before the rename: the name never points at a torn blob
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmpName, name)
	}
	if err != nil {
		root.Remove(tmpName)
		return "", fmt.Errorf("record: store blob: %w", err)
	}
	l.remember(sum, true)
	return ref, nil
}

func (l *Log) remember(sum [sha256.Size]byte, stored bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known == nil {
		l.known = make(map[[sha256.Size]byte]bool)
	}
	l.known[sum] = true
	l.blobs = l.blobs || stored
}

// Sync makes everything written so far durable, then names the last line
// in the head: after the fsync, so the head never names a line a crash
// could lose.
func (l *Log) Sync() error {
	l.mu.Lock()
	blobs := l.blobs
	l.blobs = false
	seq, last := l.seq, l.last
	l.mu.Unlock()
	if blobs {
		if err := syncPath(filepath.Join(l.dir, BlobsDir)); err != nil {
			l.mu.Lock()
			l.blobs = true
			l.mu.Unlock()
			return fmt.Errorf("record: sync blobs: %w", err)
		}
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("record: sync event log: %w", err)
	}
	if err := l.writeHead(seq, last); err != nil {
		return fmt.Errorf("record: write %s: %w", HeadFile, err)
	}
	return nil
}

// Close syncs and closes the log.
func (l *Log) Close() error {
	err := l.Sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return err
	}
	l.closed = true
	l.closeSubs()
	l.headMu.Lock()
	defer l.headMu.Unlock()
	var herr error
	if l.head != nil {
		herr = l.head.Close()
		l.head = nil
	}
	return errors.Join(err, l.f.Close(), herr)
}

// BlobPath is where a blob reference lives inside run directory dir.
func BlobPath(dir, ref string) (string, error) {
	name, ok := cutPrefix(ref, "sha256:")
	if !ok || len(name) != 64 {
		return "", fmt.Errorf("record: bad blob reference %q", ref)
	}
	if _, err := hex.DecodeString(name); err != nil {
		return "", fmt.Errorf("record: bad blob reference %q", ref)
	}
	return filepath.Join(dir, BlobsDir, name), nil
}

// ReadBlob reads the blob ref of run directory dir. It follows no symbolic
// link: neither blobs/ nor the blob itself may be one (hostfs.OpenFile).
func ReadBlob(dir, ref string) ([]byte, error) {
	p, err := BlobPath(dir, ref)
	if err != nil {
		return nil, err
	}
	b, err := hostfs.ReadFile(dir, BlobsDir+"/"+filepath.Base(p), 0)
	if err != nil {
		return nil, fmt.Errorf("record: blob %s: %w", ref, err)
	}
	return b, nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// payloadBody marshals payload and returns its members without the braces
// (`"a":1,"b":2`, empty for none). The payload must be a JSON object (or
// null) without the envelope's keys.
func payloadBody(payload any) ([]byte, error) {
	if payload == nil {
		return nil, nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("record: encode payload: %w", err)
	}
	if string(raw) == "null" {
		return nil, nil
	}
	// json.Marshal returns valid compact JSON, Marshalers' output included.
	if raw[0] != '{' {
		return nil, fmt.Errorf("record: payload must be a JSON object, not %.20s", raw)
	}
	if k, ok := reservedKey(raw); ok {
		return nil, fmt.Errorf("%w: %q", ErrReservedField, k)
	}
	return raw[1 : len(raw)-1], nil
}

// reserved are the envelope's keys.
var reserved = []string{"seq", "time", "type", "agent", "prev"}

// reservedKey returns the first top-level key of obj, a compact valid JSON
// object, that is an envelope key.
func reservedKey(obj []byte) (string, bool) {
	depth, key := 0, false
	for i := 0; i < len(obj); i++ {
		switch c := obj[i]; c {
		case '"':
			j := i + 1
			for ; obj[j] != '"'; j++ {
				if obj[j] == '\\' {
					j++
				}
			}
			if key {
				if k := unquote(obj[i : j+1]); slices.Contains(reserved, k) {
					return k, true
				}
				key = false
			}
			i = j
		case '{', '[':
			depth++
			key = depth == 1
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		}
	}
	return "", false
}

func unquote(q []byte) string {
	if !bytes.ContainsRune(q, '\\') {
		return string(q[1 : len(q)-1])
	}
	var s string
	json.Unmarshal(q, &s)
	return s
}
