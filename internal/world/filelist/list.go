// Package filelist reads and writes a stored world's file list (path,
// sha256, size of every file) in its two forms: the "files" array of
// .world.json and the binary .files. It guarantees that every fast path
// decodes exactly what encoding/json decodes, or declines (false) so the
// caller decodes with encoding/json; that a hash is kept as its 32 bytes
// and the paths of a list share a few strings (no allocation per path);
// and that a list is read through a window of a few hundred KiB, never
// whole, when streamed (Stream, Around).
package filelist

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// File is one file of a world, by slash path relative to its directory.
type File struct {
	Path   string `json:"path"`
	SHA256 Hash   `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Hash is a file's SHA-256, kept as its 32 bytes (a 100,000-file world's
// list holds 3.2 MB of them, not 11 MB of hex strings) and written as
// lowercase hex (.world.json, the id, what `worlds show` prints).
type Hash [32]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

func (h *Hash) UnmarshalText(b []byte) error {
	if !h.decode(b) {
		return fmt.Errorf("filelist: a sha256 is 64 hex digits, not %q", b)
	}
	return nil
}

// decode sets h from 64 hex digits (upper or lower case): false for
// anything else.
func (h *Hash) decode(b []byte) bool {
	if len(b) != 2*len(h) {
		return false
	}
	_, err := hex.Decode(h[:], b)
	return err == nil
}

// List is a manifest's file list as .world.json holds it, decoded
// without reflection: a 100,000-file list (16 MB of JSON) costs one
// allocation per string and one slice sized in advance, where
// encoding/json's reflection took 3× the time and grew the slice by
// doubling. Anything but the form the store writes (an escape in a
// string, another key, another layout) is decoded by encoding/json.
type List []File

func (l *List) UnmarshalJSON(data []byte) error {
	if files, n, ok := parsePrefix(data); ok && (&parser{data: data, i: n}).end() {
		*l = files
		return nil
	}
	var files []File
	if err := json.Unmarshal(data, &files); err != nil {
		return err
	}
	*l = files
	return nil
}

// Split is the fast decode of a stored world's info (.world.json): its
// file list, when it has the store's form, parsed here, and the rest (a
// few hundred bytes) with the list replaced by null, for encoding/json;
// so the 16 MB of a 100,000-file list are scanned once, not three times
// (validated, skipped, decoded). False when the list is not in that form.
func Split(raw []byte) (rest []byte, files []File, ok bool) {
	// A bare quote never occurs inside a JSON string (it is escaped), and
	// no other value of .world.json holds an array, so the first key
	// "files" whose value is an array is the top-level one.
	key := []byte(`"files":`)
	for off := 0; ; {
		i := bytes.Index(raw[off:], key)
		if i < 0 {
			return nil, nil, false
		}
		i += off
		off = i + len(key)
		b := bytes.TrimRight(raw[:i], " \t\r\n")
		start := off + len(raw[off:]) - len(bytes.TrimLeft(raw[off:], " \t\r\n"))
		if len(b) == 0 || b[len(b)-1] != ',' && b[len(b)-1] != '{' || start >= len(raw) || raw[start] != '[' {
			continue
		}
		files, n, ok := parsePrefix(raw[start:])
		if !ok {
			return nil, nil, false
		}
		rest := make([]byte, 0, len(raw)-n+4)
		rest = append(append(append(rest, raw[:start]...), "null"...), raw[start+n:]...)
		return rest, files, true
	}
}

// Parse parses [{"path":"…","sha256":"…","bytes":N},…] (keys in
// any order, each once, whitespace anywhere, strings without escapes);
// false for anything else.
func Parse(data []byte) ([]File, bool) {
	files, n, ok := parsePrefix(data)
	return files, ok && (&parser{data: data, i: n}).end()
}

// parsePrefix is Parse of the array data starts with: n is
// where it ends.
func parsePrefix(data []byte) ([]File, int, bool) {
	p := parser{data: data}
	if !p.byte('[') {
		return nil, 0, false
	}
	files := make([]File, 0, bytes.Count(data, []byte(`"path"`)))
	// Every path goes into one string, made once the list is parsed
	// (spans: where each path is in data): no allocation per path.
	spans := make([][2]int, 0, cap(files))
	size := 0
	done := func() ([]File, int, bool) {
		var all strings.Builder
		all.Grow(size)
		for _, s := range spans {
			all.Write(data[s[0]:s[1]])
		}
		paths, start := all.String(), 0
		for i, s := range spans {
			files[i].Path = paths[start : start+s[1]-s[0]]
			start += s[1] - s[0]
		}
		return files, p.i, true
	}
	if p.byte(']') {
		return files, p.i, true
	}
	for {
		f, path, ok := p.entry()
		if !ok {
			return nil, 0, false
		}
		spans = append(spans, [2]int{p.at(path), p.at(path) + len(path)})
		size += len(path)
		files = append(files, f)
		if p.byte(']') {
			return done()
		}
		if !p.byte(',') {
			return nil, 0, false
		}
	}
}

// entry consumes one {"path":…,"sha256":…,"bytes":N} (keys in any order,
// each once): the file without its Path, and the path's bytes in data.
func (p *parser) entry() (f File, path []byte, ok bool) {
	if !p.byte('{') {
		return f, nil, false
	}
	var seen [3]bool
	for k := 0; k < 3; k++ {
		if k > 0 && !p.byte(',') {
			return f, nil, false
		}
		key, ok := p.raw()
		if !ok || !p.byte(':') {
			return f, nil, false
		}
		switch string(key) {
		case "path":
			path, ok = p.raw()
			ok = ok && !seen[0]
			seen[0] = true
		case "sha256":
			var b []byte
			b, ok = p.raw()
			ok = ok && f.SHA256.decode(b) && !seen[1]
			seen[1] = true
		case "bytes":
			f.Bytes, ok = p.int()
			ok = ok && !seen[2]
			seen[2] = true
		default:
			ok = false
		}
		if !ok {
			return f, nil, false
		}
	}
	return f, path, p.byte('}')
}

// at is where b, a slice of data, starts in it.
func (p *parser) at(b []byte) int { return cap(p.data) - cap(b) }

type parser struct {
	data []byte
	i    int
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c (after whitespace) if it is next.
func (p *parser) byte(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str consumes a string without escapes or control characters.
func (p *parser) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

// raw is str's bytes, in data.
func (p *parser) raw() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return p.data[start : p.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// int consumes a non-negative decimal integer.
func (p *parser) int() (int64, bool) {
	p.space()
	start := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	if p.i == start || p.i-start > 1 && p.data[start] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.data[start:p.i]), 10, 64)
	return n, err == nil
}

// end reports whether only whitespace is left.
func (p *parser) end() bool {
	p.space()
	return p.i == len(p.data)
}
