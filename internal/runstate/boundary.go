package runstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/apodex/apodex/internal/record"
)

// Boundary is where in events.jsonl a fold stands: End is where the line
// of its last event ends (after the newline), LastLen that line's length
// with its newline, LastHash its hash as the record chains it. A reader
// that finds the same line there knows the record up to End is the one
// the fold read (short of an edit that keeps every hash, which only a
// whole fold can tell).
type Boundary struct {
	End      int64  `json:"end"`
	LastLen  int    `json:"last_len"`
	LastHash string `json:"last_hash"`
}

// Boundary reads l's boundary from the record; ok is false when it is not
// known (no event, an error stopped the fold, or the record no longer
// holds l's last event there). The last line is hashed as it is read
// (a run_finished listing thousands of files is megabytes, which need not
// be held): its seq is read from its head, where apodex writes it.
func (l *Loaded) Boundary() (Boundary, bool, error) {
	if l.Dir == "" || l.off <= 0 || l.Seq == 0 {
		return Boundary{}, false, nil
	}
	f, err := os.Open(filepath.Join(l.Dir, record.EventsFile))
	if err != nil {
		return Boundary{}, false, err
	}
	defer f.Close()
	b, seq, err := boundaryAt(f, l.off)
	if err != nil || seq != l.Seq {
		return Boundary{}, false, nil // the record moved under us (cut, rewritten)
	}
	return b, true, nil
}

// boundaryAt is the boundary of the line of f that ends at off (its
// newline just before off) and that line's seq.
func boundaryAt(f *os.File, off int64) (b Boundary, seq int64, err error) {
	from, err := lineStart(f, off)
	if err != nil {
		return Boundary{}, 0, err
	}
	n := off - 1 - from // the line's length without its newline
	var head [64]byte
	k := min(n, int64(len(head)))
	if _, err := f.ReadAt(head[:k], from); err != nil {
		return Boundary{}, 0, err
	}
	var last [1]byte
	seq, ok := seqOf(head[:k])
	if ok && n > 0 {
		if _, err := f.ReadAt(last[:], off-2); err != nil {
			return Boundary{}, 0, err
		}
		ok = last[0] == '}' // no space to trim at either end: the hash is of the bytes as they are
	}
	if !ok { // not the head apodex writes: read the line whole and decode it
		line := make([]byte, n)
		if _, err := f.ReadAt(line, from); err != nil {
			return Boundary{}, 0, err
		}
		var env struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(line, &env); err != nil {
			return Boundary{}, 0, err
		}
		return Boundary{End: off, LastLen: int(n) + 1, LastHash: lineRef(line)}, env.Seq, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, from, n)); err != nil {
		return Boundary{}, 0, err
	}
	return Boundary{End: off, LastLen: int(n) + 1, LastHash: "sha256:" + hex.EncodeToString(h.Sum(nil))}, seq, nil
}

// seqOf reads the seq of a line from its head, as apodex writes it
// ({"seq":N,…); false for any other form.
func seqOf(head []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(head, []byte(`{"seq":`))
	i := 0
	for i < len(rest) && i < 19 && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if !ok || i == 0 || i == len(rest) || rest[i] != ',' || (rest[0] == '0' && i > 1) {
		return 0, false
	}
	seq, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	return seq, err == nil
}

// lineStart is where the line that ends at off (its newline just before
// off) begins, found by reading back 64 KiB at a time.
func lineStart(f *os.File, off int64) (int64, error) {
	buf := make([]byte, 64<<10)
	var nl [1]byte
	if _, err := f.ReadAt(nl[:], off-1); err != nil || nl[0] != '\n' {
		return 0, errors.New("runstate: the record does not end a line there")
	}
	for end := off - 1; end > 0; {
		from := max(end-int64(len(buf)), 0)
		chunk := buf[:end-from]
		if _, err := f.ReadAt(chunk, from); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return from + int64(i) + 1, nil
		}
		if off-1-from > record.MaxLine {
			return 0, record.ErrLineTooLong
		}
		end = from
	}
	return 0, nil
}

// Holds reports whether the record in dir still has b's line where b
// says (one read of that line).
func (b Boundary) Holds(f *os.File) bool {
	if b.LastLen <= 0 || int64(b.LastLen) > b.End {
		return false
	}
	// Hashed as it is read: a last line can be megabytes (a run_finished
	// listing thousands of files), which need not be held.
	from := b.End - int64(b.LastLen)
	var nl [1]byte
	if _, err := f.ReadAt(nl[:], b.End-1); err != nil || nl[0] != '\n' {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, from, int64(b.LastLen)-1)); err != nil {
		return false
	}
	return "sha256:"+hex.EncodeToString(h.Sum(nil)) == b.LastHash
}

// lineRef is a line's hash as the record's chain names it.
func lineRef(line []byte) string {
	sum := sha256.Sum256(bytes.TrimSpace(line))
	return "sha256:" + hex.EncodeToString(sum[:])
}
