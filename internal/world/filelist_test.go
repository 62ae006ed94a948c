package world

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The file list decodes as encoding/json decodes it, by the fast path or
// not: escapes, whitespace, other key orders, empty lists and damaged
// input included.
func TestFileListDecodesAsJSON(t *testing.T) {
	files := []File{{Path: "workspace/a b.py", SHA256: "ab", Bytes: 0}, {Path: "inputs/<é>&\"q\"\\", SHA256: "cd", Bytes: 1234567}}
	written, _ := json.Marshal(files)
	for _, in := range []string{
		string(written), `[]`, ` [ ] `, `null`,
		`[{"bytes":7,"sha256":"x","path":"p"}]`,
		"[\n {\"path\": \"p\",\n  \"sha256\": \"x\", \"bytes\": 7 },{\"path\":\"q\",\"sha256\":\"y\",\"bytes\":0}]",
		`[{"path":"p","sha256":"x","bytes":7,"extra":1}]`,
		`[{"path":"p","path":"q","bytes":7}]`,
		`[{"path":"p","sha256":"x","bytes":07}]`,
		`[{"path":"p","sha256":"x","bytes":-1}]`,
		`[{"path":"p","sha256":"x","bytes":7}`,
		`[{"path":"p","sha256":"x","bytes":7}] x`,
		`[{"path":"p\u0041","sha256":"x","bytes":7}]`,
	} {
		var want []File
		werr := json.Unmarshal([]byte(in), &want)
		var got fileList
		gerr := json.Unmarshal([]byte(in), &got)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual([]File(got), want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: got %+v (%v), want %+v (%v)", in, got, gerr, want, werr)
		}
	}
	if _, ok := parseFiles(written); ok {
		t.Error("a list with escapes took the fast path")
	}
	if got, ok := parseFiles([]byte(`[{"path":"p","sha256":"x","bytes":7}]`)); !ok || len(got) != 1 || got[0] != (File{"p", "x", 7}) {
		t.Errorf("the store's form did not take the fast path: %v %v", got, ok)
	}
}
