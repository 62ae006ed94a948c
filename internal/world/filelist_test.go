package world

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/world/filelist"
)

// h is the Hash whose 32 bytes are all the byte hex b.
func h(b string) Hash {
	var sum Hash
	hex.Decode(sum[:], []byte(strings.Repeat(b, 32)))
	return sum
}

// .world.json decodes as encoding/json decodes it, whatever its strings
// hold (a name with `"files":[` in it, escapes in paths), and a damaged
// one is an error.
func TestDecodeInfoAsJSON(t *testing.T) {
	for _, w := range []World{
		{ID: "w-1", Name: `x","files":[{"path":"evil"}],"y":"`, Files: []File{{Path: "workspace/a", SHA256: h("ab"), Bytes: 1}}, Bytes: 1},
		{ID: "w-2", Name: `a\`, Diff: map[string]float64{"files": 1}, Files: []File{{Path: "inputs/<b>", SHA256: h("cd"), Bytes: 2}, {Path: "workspace/c", SHA256: h("ef"), Bytes: 3}}},
		{ID: "w-3", Files: []File{}},
		{ID: "w-4"},
	} {
		compact, _ := json.Marshal(&w)
		indented, _ := json.MarshalIndent(&w, "", "  ") // as the store writes it
		for _, raw := range [][]byte{compact, indented} {
			var want, got World
			json.Unmarshal(raw, &want)
			if err := decodeInfo(raw, &got); err != nil || !reflect.DeepEqual(got, want) && !(len(got.Files) == 0 && len(want.Files) == 0 && got.ID == want.ID) {
				t.Errorf("%s: got %+v (%v), want %+v", raw, got, err, want)
			}
			if err := decodeInfo(raw[:len(raw)-1], &got); err == nil {
				t.Errorf("%s: a damaged .world.json decoded", raw[:len(raw)-1])
			}
		}
	}
}

// readInfo, which streams .world.json through a small window, decodes as
// encoding/json does: lists that span many windows and path chunks, a
// path longer than an entry may be (left to decodeInfo), escapes, a
// damaged file (an error).
func TestReadInfoStreamsAsJSON(t *testing.T) {
	big := World{ID: "w-big", Name: "big", Diff: map[string]float64{"files": 2}}
	for i := range 20000 {
		big.Files = append(big.Files, File{Path: fmt.Sprintf("workspace/pkg%03d/%s/f%05d.py", i/100, strings.Repeat("d", i%50), i), SHA256: h(fmt.Sprintf("%02x", i%256)), Bytes: int64(i)})
	}
	long := World{ID: "w-long", Files: []File{{Path: "a", SHA256: h("01"), Bytes: 1}, {Path: strings.Repeat("p", 70<<10), SHA256: h("02"), Bytes: 2}, {Path: "z", SHA256: h("03"), Bytes: 3}}}
	escaped := World{ID: "w-esc", Files: []File{{Path: "a", SHA256: h("01"), Bytes: 1}, {Path: "inputs/<q\"x\">", SHA256: h("02"), Bytes: 2}}}
	dir := t.TempDir()
	for _, w := range []World{big, long, escaped, {ID: "w-empty", Files: []File{}}, {ID: "w-none"}} {
		compact, _ := json.Marshal(&w)
		indented, _ := json.MarshalIndent(&w, "", "  ")
		for _, raw := range [][]byte{compact, indented} {
			p := filepath.Join(dir, "info.json")
			os.WriteFile(p, raw, 0o644)
			var want, got World
			json.Unmarshal(raw, &want)
			if err := readInfo(p, &got); err != nil || !reflect.DeepEqual(got, want) && !(len(got.Files) == 0 && len(want.Files) == 0 && got.ID == want.ID) {
				t.Errorf("%s (%d bytes): decoded %d files (%v), want %d", w.ID, len(raw), len(got.Files), err, len(want.Files))
			}
			if f, _ := os.Open(p); w.ID == "w-big" {
				if _, _, ok, err := filelist.Stream(f); !ok || err != nil {
					t.Errorf("the store's form was not streamed: %v %v", ok, err)
				}
				f.Close()
			}
			os.WriteFile(p, raw[:len(raw)*2/3], 0o644)
			if err := readInfo(p, &got); err == nil {
				t.Errorf("%s: a truncated .world.json decoded", w.ID)
			}
		}
	}
}
