package eventlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func fixedClock() func() time.Time {
	t := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func TestAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, fixedClock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(TypeToolCall, "main", ToolCall{Turn: 1, CallID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(TypeWarning, "", Warning{Code: "x", Message: "line\nbreak"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events) != 2 || c.TornTail {
		t.Fatalf("got %d events torn=%v", len(c.Events), c.TornTail)
	}
	var tc ToolCall
	if err := c.Events[0].Decode(&tc); err != nil {
		t.Fatal(err)
	}
	if tc.Name != "bash" || tc.Arguments != `{"command":"ls"}` || c.Events[0].Agent != "main" {
		t.Fatalf("round trip lost data: %+v %+v", c.Events[0], tc)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, EventsFile))
	if !bytes.HasPrefix(raw, []byte(`{"seq":1,"time":"2026-11-30T12:00:00.001Z","type":"tool_call","agent":"main",`)) {
		t.Fatalf("envelope not first: %s", raw)
	}
	if n := bytes.Count(raw, []byte("\n")); n != 2 {
		t.Fatalf("want 2 lines, got %d", n)
	}
}

func TestConcurrentAppendsHaveNoGaps(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if _, err := l.Append("x", "a", map[string]int{"i": i}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	c, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Events) != 800 {
		t.Fatalf("got %d events", len(c.Events))
	}
}

func TestReservedFieldRefused(t *testing.T) {
	l, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append("x", "a", map[string]int{"seq": 9}); !errors.Is(err, ErrReservedField) {
		t.Fatalf("want ErrReservedField, got %v", err)
	}
	if _, err := l.Append("x", "a", []int{1}); err == nil {
		t.Fatal("non-object payload accepted")
	}
	if l.Seq() != 0 {
		t.Fatalf("refused events consumed seq %d", l.Seq())
	}
}

func TestCreateRefusesExistingLog(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Create(dir, nil); err == nil {
		t.Fatal("second Create over an existing log succeeded")
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		events  int
		torn    bool
		wantErr bool
	}{
		{"empty", "", 0, false, false},
		{"two", "{\"seq\":1,\"type\":\"a\"}\n{\"seq\":2,\"type\":\"b\"}\n", 2, false, false},
		{"torn tail", "{\"seq\":1,\"type\":\"a\"}\n{\"seq\":2,\"ty", 1, true, false},
		{"last line complete without newline", "{\"seq\":1,\"type\":\"a\"}", 1, false, false},
		{"bad middle", "{\"seq\":1,\"type\":\"a\"}\nnot json\n{\"seq\":2,\"type\":\"b\"}\n", 1, false, true},
		{"gap", "{\"seq\":1,\"type\":\"a\"}\n{\"seq\":3,\"type\":\"b\"}\n", 1, false, true},
		{"duplicate", "{\"seq\":1,\"type\":\"a\"}\n{\"seq\":1,\"type\":\"b\"}\n", 1, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if len(c.Events) != tc.events || c.TornTail != tc.torn {
				t.Fatalf("events %d torn %v, want %d %v", len(c.Events), c.TornTail, tc.events, tc.torn)
			}
		})
	}
}

func TestBlobs(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref, err := l.PutBlob([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if ref != "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("ref %s", ref)
	}
	ref2, _ := l.PutBlob([]byte("hello"))
	if ref2 != ref {
		t.Fatal("same content, different ref")
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	p, err := BlobPath(dir, ref)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "hello" {
		t.Fatalf("blob content %q", b)
	}
	for _, bad := range []string{"sha256:../../etc/passwd", "md5:abc", "sha256:" + strings.Repeat("z", 64)} {
		if _, err := BlobPath(dir, bad); err == nil {
			t.Errorf("BlobPath accepted %q", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("{\"seq\":1,\"type\":\"a\"}\n"))
	f.Add([]byte("{\"seq\":1,\"type\":\"a\"}\n{\"seq\":2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(bytes.NewReader(data))
		for i, e := range c.Events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d (err %v)", i, e.Seq, err)
			}
		}
	})
}

func TestOpenRepairsTornTailAndContinuesSeq(t *testing.T) {
	for _, tc := range []struct {
		name, tail string
		events     int
	}{
		{"fragment", `{"seq":3,"ty`, 2},
		{"whole event without newline", "whole", 3},
		{"clean", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Create(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.Append("a", "", nil)
			l.Append("b", "", nil)
			l.Close()
			tail := tc.tail
			if tail == "whole" { // as apodex wrote it, chained to line 2
				c, _ := Read(dir)
				tail = strings.TrimSuffix(string(encodeLine(3, time.Now(), "x", "", lineHash(c.Events[1].Raw), nil)), "\n")
			}
			f, _ := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(tail)
			f.Close()
			l, _, repaired, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if repaired != (tc.tail != "") {
				t.Fatalf("repaired = %v", repaired)
			}
			seq, err := l.Append("c", "", nil)
			if err != nil || seq != int64(tc.events+1) {
				t.Fatalf("next seq %d (%v), want %d", seq, err, tc.events+1)
			}
			l.Close()
			c, err := Read(dir)
			if err != nil || c.TornTail || len(c.Events) != tc.events+1 {
				t.Fatalf("after repair: %d events, torn %v, err %v", len(c.Events), c.TornTail, err)
			}
		})
	}
}

func TestFirstAndLast(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3000; i++ {
		l.Append("x", "a", map[string]string{"pad": strings.Repeat("p", 100)})
	}
	l.Append("end", "", nil)
	l.Close()
	f, _ := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":3002,"ty`)
	f.Close()
	first, err := First(dir)
	if err != nil || first.Seq != 1 {
		t.Fatalf("first %+v %v", first, err)
	}
	last, err := Last(dir)
	if err != nil || last.Seq != 3001 || last.Type != "end" {
		t.Fatalf("last %+v %v", last, err)
	}
}
