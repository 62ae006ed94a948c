package termtext_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/termtext"
)

func TestClean(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain text stays", "sum=6637.00 rows=6\n\tdone", "sum=6637.00 rows=6\n\tdone"},
		{"UTF-8 stays", "naïve – 日本 ✓", "naïve – 日本 ✓"},
		{"title change (OSC 0)", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"screen clear (CSI)", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"clipboard write (OSC 52)", "\x1b]52;c;cm0gLXJmIH4=\x07", `\x1b]52;c;cm0gLXJmIH4=\x07`},
		{"OSC ended by ST", "\x1b]8;;http://x\x1b\\link", `\x1b]8;;http://x\x1b\link`},
		{"a forged line after CR", "ok\r finished: completed", `ok\r finished: completed`},
		{"CR LF stays", "a\r\nb\r\n", "a\r\nb\r\n"},
		{"CR at the end", "a\r", `a\r`},
		{"backspace, BEL, NUL, DEL", "a\bb\ac\x00d\x7f", `a\x08b\x07c\x00d\x7f`},
		{"C1 CSI as a rune", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 NEL and OSC", "\u0085\u009d", `\u0085\u009d`},
		{"a lone C1 byte (not UTF-8)", "a\x9b2J", `a\x9b2J`},
		{"invalid UTF-8", "\xff\xfe", `\xff\xfe`},
		{"bidi override (Trojan Source)", "x\u202eevil\u202c", `x\u202eevil\u202c`},
		{"bidi isolates and marks", "\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := termtext.Clean(c.in); got != c.want {
				t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := termtext.NewWriter(&b)
	n, err := w.Write([]byte("title \x1b]0;pwned\x07\n"))
	if err != nil || n != 17 {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if got := b.String(); got != `title \x1b]0;pwned\x07`+"\n" {
		t.Errorf("wrote %q", got)
	}
	if termtext.Raw(w) != &b || termtext.Raw(&b) != &b || termtext.NewWriter(w) != w {
		t.Error("Raw does not give the writer under a Writer")
	}
}

// FuzzClean: whatever the input, the output is valid UTF-8 with no control
// a terminal acts on (LF, tab and CR LF aside), and clean text is kept.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "plain\n", "\x1b]0;x\x07", "\r\n\r", "\u202e\u009b\x9b\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := termtext.Clean(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Clean(%q) = %q is not UTF-8", s, out)
		}
		for i, r := range out {
			bad := (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
				strings.ContainsRune("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", r)
			if r == '\r' && !strings.HasPrefix(out[i:], "\r\n") {
				bad = true
			}
			if bad {
				t.Fatalf("Clean(%q) = %q keeps %U at %d", s, out, r, i)
			}
		}
		if termtext.Clean(out) != out {
			t.Fatalf("Clean(%q) = %q is not clean by its own measure", s, out)
		}
	})
}
