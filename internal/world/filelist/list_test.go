package filelist

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// h is the Hash whose 32 bytes are all the byte hex b.
func h(b string) Hash {
	var sum Hash
	hex.Decode(sum[:], []byte(strings.Repeat(b, 32)))
	return sum
}

// The file list decodes as encoding/json decodes it, by the fast path or
// not: escapes, whitespace, other key orders, empty lists and damaged
// input included.
func TestFileListDecodesAsJSON(t *testing.T) {
	files := []File{{Path: "workspace/a b.py", SHA256: h("ab"), Bytes: 0}, {Path: "inputs/<é>&\"q\"\\", SHA256: h("cd"), Bytes: 1234567}}
	x, y := strings.Repeat("0a", 32), strings.Repeat("F1", 32)
	written, _ := json.Marshal(files)
	for _, in := range []string{
		string(written), `[]`, ` [ ] `, `null`,
		`[{"bytes":7,"sha256":"` + x + `","path":"p"}]`,
		"[\n {\"path\": \"p\",\n  \"sha256\": \"" + x + "\", \"bytes\": 7 },{\"path\":\"q\",\"sha256\":\"" + y + "\",\"bytes\":0}]",
		`[{"path":"p","sha256":"` + x + `","bytes":7,"extra":1}]`,
		`[{"path":"p","path":"q","bytes":7}]`,
		`[{"path":"p","sha256":"` + x + `","bytes":07}]`,
		`[{"path":"p","sha256":"` + x + `","bytes":-1}]`,
		`[{"path":"p","sha256":"` + x + `","bytes":7}`,
		`[{"path":"p","sha256":"` + x + `","bytes":7}] x`,
		`[{"path":"p\u0041","sha256":"` + x + `","bytes":7}]`,
		`[{"path":"p","sha256":"x","bytes":7}]`,
		`[{"path":"p","sha256":"` + x + `0","bytes":7}]`,
	} {
		var want []File
		werr := json.Unmarshal([]byte(in), &want)
		var got List
		gerr := json.Unmarshal([]byte(in), &got)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual([]File(got), want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: got %+v (%v), want %+v (%v)", in, got, gerr, want, werr)
		}
	}
	if _, ok := Parse(written); ok {
		t.Error("a list with escapes took the fast path")
	}
	if got, ok := Parse([]byte(`[{"path":"p","sha256":"` + x + `","bytes":7},{"path":"dir/q","sha256":"` + y + `","bytes":0}]`)); !ok || len(got) != 2 || got[0] != (File{"p", h("0a"), 7}) || got[1] != (File{"dir/q", h("f1"), 0}) {
		t.Errorf("the store's form did not take the fast path: %v %v", got, ok)
	}
}

// The binary list decodes to what was encoded; anything cut or added is
// an error.
func TestListRoundTrip(t *testing.T) {
	for _, files := range [][]File{
		{},
		{{"a", h("01"), 0}},
		{{"inputs/<é>\"q\"", h("02"), 1 << 40}, {strings.Repeat("p", 70000), h("03"), 7}, {"", h("04"), 1}},
	} {
		raw := Encode(files)
		got, err := Decode(raw)
		if err != nil || !reflect.DeepEqual(got, files) {
			t.Errorf("%d files: got %v (%v)", len(files), len(got), err)
		}
		for _, bad := range [][]byte{raw[:len(raw)-1], append(append([]byte(nil), raw...), 0), raw[1:]} {
			if _, err := Decode(bad); err == nil && len(files) > 0 {
				t.Errorf("a damaged list of %d files decoded", len(files))
			}
		}
	}
}

// Read streams a list whose paths span several chunks (and one path
// longer than a chunk) to what was encoded, and reports the reader's own
// error, not damage, when the reader fails.
func TestReadStreamsAcrossChunks(t *testing.T) {
	var files []File
	for i := range 30000 {
		files = append(files, File{Path: fmt.Sprintf("workspace/d%03d/file-%06d.py", i/100, i), SHA256: h(fmt.Sprintf("%02x", i%256)), Bytes: int64(i)})
	}
	files = append(files, File{Path: "workspace/z/" + strings.Repeat("long", chunkSize/4+10), SHA256: h("ee"), Bytes: 9})
	raw := Encode(files)
	got, err := Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil || !reflect.DeepEqual(got, files) {
		t.Fatalf("got %d files (%v), want %d", len(got), err, len(files))
	}
	boom := errors.New("disk on fire")
	if _, err := Read(io.MultiReader(bytes.NewReader(raw[:len(raw)/2]), iotest.ErrReader(boom)), int64(len(raw))); !errors.Is(err, boom) {
		t.Errorf("a failing reader: %v, want %v", err, boom)
	}
	if _, err := Read(bytes.NewReader(raw[:len(raw)/2]), int64(len(raw))); !errors.Is(err, ErrDamaged) {
		t.Errorf("a list cut short: %v, want ErrDamaged", err)
	}
}
