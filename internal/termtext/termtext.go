// Package termtext makes text that came from a model, a command or a file
// safe to print on a terminal.
//
// Guarantees:
//   - Clean leaves no byte a terminal acts on other than a line feed, a tab
//     and a carriage return that ends a line (CR LF): every other C0 control
//     (ESC, so every CSI, OSC and DCS sequence; BEL; backspace; a lone CR),
//     DEL, the C1 controls U+0080–U+009F, the bidirectional controls
//     (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and each byte
//     that is not UTF-8 is shown escaped, as \xHH (bytes below 0x80 and
//     bytes that are not UTF-8), \r, or \uHHHH (runes);
//   - text without any of them is returned unchanged (same string);
//   - a Writer applies Clean to everything written through it; Raw gives
//     the writer under it, for output that must stay exact (a patch, a
//     tar) or that is coloured after its parts were cleaned; JSON gives a
//     writer for JSON text that escapes what encoding/json leaves raw (C1
//     and bidirectional controls, DEL) without changing what it means.
package termtext

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean returns s with every control sequence a terminal would act on
// shown escaped (see the package doc); \n, \t and CR LF are kept.
func Clean(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteString("\r\n")
			n = 2
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// firstUnsafe is the index of the first byte Clean would change, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				i += 2
				continue
			}
			if unsafe(rune(c)) {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || unsafe(r) {
			return i
		}
		i += n
	}
	return -1
}

// unsafe reports whether a terminal may act on r (CR LF aside).
func unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	}
	return unicode.Is(unicode.Bidi_Control, r)
}

// Writer cleans everything written through it. Each Write is cleaned on its
// own: a CR LF split across two writes shows the CR escaped.
type Writer struct{ w io.Writer }

// NewWriter returns a Writer over w (w itself when it is one already).
func NewWriter(w io.Writer) *Writer {
	if tw, ok := w.(*Writer); ok {
		return tw
	}
	return &Writer{w: w}
}

// Write writes Clean(p); it reports len(p) written when all of it was.
func (t *Writer) Write(p []byte) (int, error) {
	s := string(p)
	if firstUnsafe(s) < 0 {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, Clean(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Raw is the writer under w when w is a Writer, else w.
func Raw(w io.Writer) io.Writer {
	if tw, ok := w.(*Writer); ok {
		return tw.w
	}
	return w
}

// JSON returns a writer for JSON text that escapes, as \uHHHH, the runes a
// terminal may act on that encoding/json writes raw: the C1 controls
// U+0080–U+009F (U+009B is a CSI), DEL and the bidirectional controls. In
// valid JSON they occur only inside strings, where the escape decodes to
// the same rune: the JSON means exactly what it meant (training data stays
// exact) and prints safely. A rune split across two writes is held back
// until its end arrives.
func JSON(w io.Writer) io.Writer {
	return &jsonWriter{w: Raw(w)}
}

type jsonWriter struct {
	w     io.Writer
	carry []byte // the start of a rune the last write cut
}

func (j *jsonWriter) Write(p []byte) (int, error) {
	buf := append(j.carry, p...)
	j.carry = nil
	end := len(buf)
	// Hold back an incomplete rune at the end (at most 3 bytes).
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				end = len(buf) - k
			}
			break
		}
	}
	var out []byte
	last := 0
	for i := 0; i < end; {
		c := buf[i]
		if c < utf8.RuneSelf && c != 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRune(buf[i:end])
		if r == 0x7f || r >= 0x80 && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r) {
			out = append(out, buf[last:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			last = i + n
		}
		i += n
	}
	if out != nil {
		out = append(out, buf[last:end]...)
	} else {
		out = buf[:end]
	}
	j.carry = append([]byte(nil), buf[end:]...)
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
