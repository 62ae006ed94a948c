package world

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// fileList is a manifest's file list as .world.json holds it, decoded
// without reflection: a 100,000-file list (16 MB of JSON) costs one
// allocation per string and one slice sized in advance, where
// encoding/json's reflection took 3× the time and grew the slice by
// doubling. Anything but the form the store writes (an escape in a
// string, another key, another layout) is decoded by encoding/json.
type fileList []File

func (l *fileList) UnmarshalJSON(data []byte) error {
	if files, n, ok := parseFilesPrefix(data); ok && (&parser{data: data, i: n}).end() {
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

// decodeInfo decodes .world.json into w. Its file list, when it has the
// store's form, is parsed here and the rest (a few hundred bytes) given
// to encoding/json, so that the 16 MB of a 100,000-file list are
// scanned once, not three times (validated, skipped, decoded).
func decodeInfo(raw []byte, w *World) error {
	// A bare quote never occurs inside a JSON string (it is escaped), and
	// no other value of .world.json holds an array, so the first key
	// "files" whose value is an array is the top-level one.
	key := []byte(`"files":`)
	for off := 0; ; {
		i := bytes.Index(raw[off:], key)
		if i < 0 {
			break
		}
		i += off
		off = i + len(key)
		b := bytes.TrimRight(raw[:i], " \t\r\n")
		start := off + len(raw[off:]) - len(bytes.TrimLeft(raw[off:], " \t\r\n"))
		if len(b) == 0 || b[len(b)-1] != ',' && b[len(b)-1] != '{' || start >= len(raw) || raw[start] != '[' {
			continue
		}
		files, n, ok := parseFilesPrefix(raw[start:])
		if !ok {
			break
		}
		rest := make([]byte, 0, len(raw)-n+4)
		rest = append(append(append(rest, raw[:start]...), "null"...), raw[start+n:]...)
		if err := json.Unmarshal(rest, w); err != nil {
			return err
		}
		w.Files = files
		return nil
	}
	var info struct {
		*World
		Files fileList `json:"files"`
	}
	info.World = w
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	w.Files = info.Files
	return nil
}

// parseFiles parses [{"path":"…","sha256":"…","bytes":N},…] (keys in
// any order, each once, whitespace anywhere, strings without escapes);
// false for anything else.
func parseFiles(data []byte) ([]File, bool) {
	files, n, ok := parseFilesPrefix(data)
	return files, ok && (&parser{data: data, i: n}).end()
}

// parseFilesPrefix is parseFiles of the array data starts with: n is
// where it ends.
func parseFilesPrefix(data []byte) ([]File, int, bool) {
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
