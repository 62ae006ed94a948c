package termtext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// JSON text through the JSON writer means the same and carries no C1 or
// bidirectional control raw, also when the writes cut a rune in two.
func TestJSONWriterEscapesWhatEncodingJSONLeaves(t *testing.T) {
	v := map[string]string{"text": "a\u009b31mred\u202eevil\u007f ok é 日本 \u2028 \x1b"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\u009b")) {
		t.Fatal("encoding/json escaped U+009B itself: the writer is not needed")
	}
	for _, step := range []int{len(raw), 1, 2, 3, 5} {
		var b bytes.Buffer
		w := JSON(&b)
		for i := 0; i < len(raw); i += step {
			if _, err := w.Write(raw[i:min(i+step, len(raw))]); err != nil {
				t.Fatal(err)
			}
		}
		out := b.Bytes()
		for _, bad := range []string{"\u009b", "\u202e", "\x7f", "\x1b"} {
			if bytes.Contains(out, []byte(bad)) {
				t.Errorf("writes of %d bytes: %q left raw in %s", step, bad, out)
			}
		}
		var back map[string]string
		if err := json.Unmarshal(out, &back); err != nil || back["text"] != v["text"] {
			t.Errorf("writes of %d bytes: %s does not decode to the same text (%v)", step, out, err)
		}
	}
}
