package eventlog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawObject is a payload whose JSON is exactly itself.
type rawObject string

func (r rawObject) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestAppendLine(t *testing.T) {
	const env = `{"seq":1,"time":"2026-11-30T12:00:00.001Z","type":"t","agent":"a","prev":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`
	type ordered struct {
		Zed   int    `json:"zed"`
		Alpha string `json:"alpha,omitempty"`
		Mid   []int  `json:"mid"`
	}
	for _, tc := range []struct {
		name    string
		agent   string
		payload any
		want    string
	}{
		{"nil", "a", nil, env + "}"},
		{"empty struct", "a", struct{}{}, env + "}"},
		{"nil pointer", "a", (*ordered)(nil), env + "}"},
		{"struct field order", "a", ordered{Zed: 1, Mid: []int{2}}, env + `,"zed":1,"mid":[2]}`},
		{"map sorted", "a", map[string]int{"b": 2, "a": 1}, env + `,"a":1,"b":2}`},
		{"marshaler compacted", "a", rawObject(`{ "x" : [1, 2] }`), env + `,"x":[1,2]}`},
		{"envelope keys as values and nested", "a", rawObject(`{"k":"seq","n":{"seq":1,"type":[{"agent":2}]}}`), env + `,"k":"seq","n":{"seq":1,"type":[{"agent":2}]}}`},
		{"agent escaped like json", `a"<b>`, nil, strings.Replace(env, `"agent":"a"`, `"agent":"a\"\u003cb\u003e"`, 1) + "}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Create(dir, fixedClock())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append("t", tc.agent, tc.payload); err != nil {
				t.Fatal(err)
			}
			l.Close()
			raw, _ := os.ReadFile(filepath.Join(dir, EventsFile))
			if got := strings.TrimSuffix(string(raw), "\n"); got != tc.want {
				t.Errorf("line\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(raw) {
				t.Errorf("not JSON: %s", raw)
			}
		})
	}
}

func TestAppendRefusesReservedKeys(t *testing.T) {
	l, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type tagged struct {
		Who string `json:"agent"`
	}
	for _, p := range []any{
		map[string]int{"time": 1},
		tagged{Who: "x"},
		rawObject(`{"a":1,"type":2}`),
		rawObject(`{"s\u0065q":1}`), // an escaped key decodes to "seq"
	} {
		if _, err := l.Append("x", "a", p); !errors.Is(err, ErrReservedField) {
			t.Errorf("%#v: want ErrReservedField, got %v", p, err)
		}
	}
	for _, p := range []any{[]int{1}, "s", 3, rawObject(`[{"a":1}]`)} {
		if _, err := l.Append("x", "a", p); err == nil {
			t.Errorf("%#v: non-object payload accepted", p)
		}
	}
	if l.Seq() != 0 {
		t.Fatalf("refused events consumed seq %d", l.Seq())
	}
}

// FuzzReservedKey compares the key scan with a full decode.
func FuzzReservedKey(f *testing.F) {
	for _, s := range []string{`{"seq":1}`, `{"a":"seq"}`, `{"a":{"time":1},"b":[{"type":2}]}`, `{"a\"":"\\","agent":0}`, `{"\u0074ype":1}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := json.Marshal(json.RawMessage(data)) // compact, as Append sees it
		if err != nil || raw[0] != '{' {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return
		}
		want := false
		for _, k := range reserved {
			_, ok := fields[k]
			want = want || ok
		}
		if _, got := reservedKey(raw); got != want {
			t.Errorf("reservedKey(%s) = %v, want %v", raw, got, want)
		}
	})
}

func TestFileDeltaContentRoundTrips(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := FileDelta{CallID: "c", Path: "/workspace/a.txt", After: "sha256:x", Bytes: 1,
		Content: "line 1\n\"quoted\" <tag> & \\ \t\x00 \u2028 é 😀\r\n"}
	if _, err := l.Append(TypeFileDelta, "main", want); err != nil {
		t.Fatal(err)
	}
	l.Close()
	c, err := Read(dir)
	if err != nil || len(c.Events) != 1 {
		t.Fatalf("%v %d", err, len(c.Events))
	}
	var got FileDelta
	if err := c.Events[0].Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("round trip\n got %+v\nwant %+v", got, want)
	}
	if strings.Contains(string(c.Events[0].Raw), "content_ref") {
		t.Errorf("empty content_ref written: %s", c.Events[0].Raw)
	}
}

func TestPutBlobStoresOnce(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref, err := l.PutBlob([]byte("tools"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := BlobPath(dir, ref)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.PutBlob([]byte("tools"))
	if err != nil || again != ref {
		t.Fatalf("second PutBlob %s %v", again, err)
	}
	if fi2, _ := os.Stat(p); !os.SameFile(fi, fi2) {
		t.Error("the blob was written again")
	}
	ents, _ := os.ReadDir(filepath.Join(dir, BlobsDir))
	if len(ents) != 1 {
		t.Errorf("blobs/ holds %d entries, want 1 (no temporary file left)", len(ents))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkAppend(b *testing.B) {
	l, err := Create(b.TempDir(), func() time.Time { return time.Unix(0, 0) })
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := ToolResult{Turn: 3, CallID: "call_3_0", Name: "write_file", Output: strings.Repeat("output ", 40), DurationMS: 2}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(TypeToolResult, "main", ev); err != nil {
			b.Fatal(err)
		}
	}
}
