package inbox

import (
	"bytes"
	"testing"
)

var seedLines = []string{
	`{"op":"say","id":"M1","text":"hello","time":"2026-01-02T03:04:05Z","sender":"cli"}`,
	`{"op":"update","id":"M3","text":"new","class":"priority_change","time":"2026-01-02T03:04:05+09:00"}`,
	`{"op":"withdraw","id":"M3"}`,
	`{"op":"control","kind":"budget","args":{"turns":"60"}}`,
	`{"op":"delivered","id":"M3","seq":57,"time":"2026-01-02T03:04:05Z"}`,
	`{"op":"applied","id":"C1","seq":1}`,
	`{"op":"say","text":""}`,
	`{"op":"update","id":"M0","text":"x"}`,
	`{"op":"say","text":"x","time":"yesterday"}`,
	`{"op":"say",`,
	`[]`,
}

// FuzzParseLine: the parser never panics, and an accepted line re-encodes
// to a line that parses to the same encoding.
func FuzzParseLine(f *testing.F) {
	for _, s := range seedLines {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseLine(b)
		if err != nil {
			return
		}
		enc := encodeLine(c)
		if bytes.Count(enc, []byte("\n")) != 1 {
			t.Fatalf("encoding is not one line: %q", enc)
		}
		c2, err := parseLine(bytes.TrimSuffix(enc, []byte("\n")))
		if err != nil {
			t.Fatalf("re-encoded line rejected: %v: %q", err, enc)
		}
		if enc2 := encodeLine(c2); !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the line:\n%s%s", enc, enc2)
		}
	})
}

// FuzzIncrementalRead: reading a file in two parts (a torn tail, then the
// rest) folds to the same messages and controls as reading it whole.
func FuzzIncrementalRead(f *testing.F) {
	all := []byte{}
	for _, s := range seedLines {
		all = append(all, s...)
		all = append(all, '\n')
	}
	f.Add(all, 40)
	f.Add([]byte("{\"op\":\"say\",\"text\":\"a\"}\n\n  \n{\"op\":\"say\",\"text\":\"b\"}"), 7)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 || cut > len(data) {
			return
		}
		whole := newBook()
		scanLines(data, whole.inboxLine)
		parts := newBook()
		off := scanLines(data[:cut], parts.inboxLine)
		scanLines(data[off:], parts.inboxLine)
		if len(whole.msgs) != len(parts.msgs) || len(whole.ctrls) != len(parts.ctrls) || whole.bad != parts.bad {
			t.Fatalf("whole %d/%d/%d, parts %d/%d/%d", len(whole.msgs), len(whole.ctrls), whole.bad, len(parts.msgs), len(parts.ctrls), parts.bad)
		}
		for i := range whole.msgs {
			if *whole.msgs[i] != *parts.msgs[i] {
				t.Fatalf("message %d differs: %+v vs %+v", i, *whole.msgs[i], *parts.msgs[i])
			}
		}
	})
}
