package filelist

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// Sizes of Stream's window: an entry longer than maxEntry is declined.
const (
	windowSize = 256 << 10
	maxEntry   = 64 << 10
	chunkSize  = 256 << 10 // paths are kept in strings of about this size
)

// window is a buffered view of a reader: buf[lo:hi] is what is read and
// not consumed.
type window struct {
	r      io.Reader
	buf    []byte
	lo, hi int
	eof    bool
	err    error
}

// fill makes at least n bytes available, unless the reader ends first.
func (w *window) fill(n int) {
	if w.hi-w.lo >= n || w.eof {
		return
	}
	w.hi = copy(w.buf, w.buf[w.lo:w.hi])
	w.lo = 0
	for w.hi < len(w.buf) && !w.eof {
		k, err := w.r.Read(w.buf[w.hi:])
		w.hi += k
		if err == io.EOF {
			w.eof = true
		} else if err != nil {
			w.eof, w.err = true, err
		}
	}
}

func (w *window) data() []byte { return w.buf[w.lo:w.hi] }

// Stream is Split reading from r through a window of a few hundred KiB:
// the list is parsed entry by entry, never held whole, its paths kept in
// strings of about 256 KiB. False (and nothing decoded) when the info is
// not in the store's form.
func Stream(r io.Reader) (rest []byte, files []File, ok bool, err error) {
	win := &window{r: r, buf: make([]byte, windowSize)}
	head, ok := infoHead(win)
	if !ok {
		return nil, nil, false, win.err
	}
	files, ok = streamFiles(win)
	if !ok || win.err != nil {
		return nil, nil, false, win.err
	}
	// The tail: everything after the array.
	tail := append([]byte(nil), win.data()...)
	for !win.eof {
		win.lo = win.hi
		win.fill(windowSize)
		tail = append(tail, win.data()...)
	}
	if win.err != nil {
		return nil, nil, false, win.err
	}
	return append(append(head, "null"...), tail...), files, true, nil
}

// infoHead reads the head of .world.json from win: everything up to the
// files array (a few hundred bytes: id, name, generator, difficulty),
// found as decodeInfo finds it, and leaves win just after the array's
// '['. False when there is no such array.
func infoHead(win *window) ([]byte, bool) {
	var head []byte
	key := []byte(`"files":`)
	for off := 0; ; { // off: where to look for the key next
		for {
			i := bytes.Index(head[off:], key)
			if i < 0 {
				off = max(off, len(head)-len(key)) // a key cut by the window's end is found whole next time
				break
			}
			i += off
			b := bytes.TrimRight(head[:i], " \t\r\n")
			rest := bytes.TrimLeft(head[i+len(key):], " \t\r\n")
			if len(rest) == 0 && !win.eof {
				off = i // what follows the key is in the next window
				break
			}
			if len(b) == 0 || b[len(b)-1] != ',' && b[len(b)-1] != '{' || len(rest) == 0 || rest[0] != '[' {
				off = i + len(key) // a key "files" elsewhere (difficulty): the next
				continue
			}
			// Give back what follows the '[' to the window.
			at := len(head) - len(rest) + 1
			if len(head)-at > len(win.buf) {
				return nil, false
			}
			win.lo, win.hi = 0, copy(win.buf, head[at:])
			return head[:at-1], true
		}
		if win.eof || len(head) > 4*windowSize {
			return nil, false
		}
		win.fill(windowSize)
		head = append(head, win.data()...)
		win.lo = win.hi
	}
}

// streamFiles parses the entries of a file list in the store's form
// (parseFilesPrefix's) from win, just after its '[', through its ']'.
func streamFiles(win *window) ([]File, bool) {
	var files []File
	var chunk []byte // the paths of files[from:], in order
	var ends []int   // where each of them ends in chunk
	from := 0
	flush := func() {
		s := string(chunk)
		start := 0
		for i, end := range ends {
			files[from+i].Path = s[start:end]
			start = end
		}
		chunk, ends, from = chunk[:0], ends[:0], len(files)
	}
	chunk = make([]byte, 0, chunkSize)
	win.fill(maxEntry)
	p := parser{data: win.data()}
	if p.byte(']') {
		win.lo += p.i
		return []File{}, true
	}
	for {
		win.fill(maxEntry)
		p := parser{data: win.data()}
		f, path, ok := p.entry()
		if !ok || p.i > maxEntry {
			return nil, false
		}
		if len(chunk)+len(path) > cap(chunk) {
			flush()
		}
		chunk = append(chunk, path...)
		ends = append(ends, len(chunk))
		files = append(files, f)
		closed := p.byte(']')
		if !closed && !p.byte(',') {
			return nil, false
		}
		win.lo += p.i
		if closed {
			flush()
			return files, true
		}
	}
}

// Around is the info in f (.world.json) with its list replaced by null,
// read from its head (up to the list) and its tail (after it) only: the
// store writes the list last but for "bytes", a number, so the list ends
// at the file's last ']'. False when f is not in that form.
func Around(f *os.File) (rest []byte, ok bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	const end = 4 << 10
	tail := make([]byte, min(fi.Size(), end))
	if _, err := f.ReadAt(tail, fi.Size()-int64(len(tail))); err != nil {
		return nil, false, err
	}
	win := &window{r: f, buf: make([]byte, windowSize)}
	head, ok := infoHead(win)
	i := bytes.LastIndexByte(tail, ']')
	if !ok || i < 0 || !json.Valid(append(append(head, "null"...), tail[i+1:]...)) {
		return nil, false, win.err
	}
	return append(append(head, "null"...), tail[i+1:]...), true, nil
}
