package eventlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// chained writes a record of n events (the last a run_finished), closed.
func chained(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	l, err := Create(dir, fixedClock())
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		l.Append(TypeWarning, "", Warning{Code: "x", Message: fmt.Sprintf("event %d", i)})
	}
	l.Append(TypeRunFinished, "", RunFinished{Termination: "completed"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editLines rewrites the record's lines with f (lines without newlines).
func editLines(t *testing.T, dir string, f func([]string) []string) {
	t.Helper()
	p := filepath.Join(dir, EventsFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := f(strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"))
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

var seqField = regexp.MustCompile(`^\{"seq":\d+,`)

// renumber gives lines seq 1, 2, … again, as an editor hiding a removal would.
func renumber(lines []string) []string {
	for i := range lines {
		lines[i] = seqField.ReplaceAllString(lines[i], fmt.Sprintf(`{"seq":%d,`, i+1))
	}
	return lines
}

func TestChainIntact(t *testing.T) {
	dir := chained(t, 5)
	c, err := ReadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	in := c.Integrity
	if !in.Chained || in.From != 1 || in.HeadSeq != 5 || in.Err != nil {
		t.Fatalf("integrity of an intact record: %+v", in)
	}
	for i, e := range c.Events {
		want := hashRef(genesis)
		if i > 0 {
			want = hashRef(lineHash(c.Events[i-1].Raw))
		}
		if e.Prev != want {
			t.Fatalf("seq %d: prev %s, want %s", e.Seq, e.Prev, want)
		}
	}
}

// Every change a hand or a tool that does not know the chain makes is
// refused by ReadChecked and Open (nothing written), naming the first bad
// seq and its line; Read still reads it and reports the same.
func TestChainBreaks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(t *testing.T, dir string)
		seq     int64
		message string
	}{
		{"edited middle line", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string { l[2] = strings.Replace(l[2], "event 3", "event X", 1); return l })
		}, 4, "its prev is not the hash of line 3 (seq 3): seq 3 was edited"},
		{"removed middle line, renumbered", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string { return renumber(append(l[:2], l[3:]...)) })
		}, 3, "lines were removed or inserted before seq 3"},
		{"inserted line", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string {
				return renumber(append(l[:2], append([]string{strings.Replace(l[1], "event 2", "event 2b", 1)}, l[2:]...)...))
			})
		}, 3, "seq 2 was edited"},
		{"first line edited", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string { l[0] = strings.Replace(l[0], "event 1", "event 0", 1); return l })
		}, 2, "seq 1 was edited"},
		{"prev removed", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string { l[3] = prevField.ReplaceAllString(l[3], ""); return l })
		}, 4, "it has no prev, but the hash chain began at seq 1"},
		{"run_finished dropped", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string { return l[:len(l)-1] })
		}, 6, "the record ends at seq 5, but events.head says seq 6 was written"},
		{"last line edited", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string {
				l[len(l)-1] = strings.Replace(l[len(l)-1], "completed", "cancelled", 1)
				return l
			})
		}, 6, "it is not the line apodex wrote (events.head holds another hash for seq 6)"},
		// The edited line is last, nothing chains to it: the cut is what is
		// named.
		{"cut after an edited line", func(t *testing.T, dir string) {
			editLines(t, dir, func(l []string) []string { l[3] = strings.Replace(l[3], "event 4", "../../x", 1); return l[:4] })
		}, 5, "the record ends at seq 4, but events.head says seq 6 was written: seq 5 to 6 were removed"},
		{"run_finished dropped, lines after it", func(t *testing.T, dir string) {
			l, _, _, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.Append(TypeResumed, "", Resumed{AfterSeq: 6})
			l.Close()
			editLines(t, dir, func(l []string) []string { return renumber(append(l[:5], l[6:]...)) })
		}, 6, "lines were removed or inserted before seq 6"},
		{"head removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, HeadFile)) },
			6, "events.head is missing, but the record is hash-chained from seq 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := chained(t, 6)
			tc.edit(t, dir)
			before, _ := os.ReadFile(filepath.Join(dir, EventsFile))
			c, err := Read(dir)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			var ie *IntegrityError
			for name, err := range map[string]error{"Read": c.Integrity.Check(), "ReadChecked": func() error { _, err := ReadChecked(dir); return err }(),
				"Open": func() error { _, _, _, err := Open(dir, nil); return err }()} {
				if !errors.As(err, &ie) || !errors.Is(err, ErrTampered) || ie.Seq != tc.seq || !strings.Contains(err.Error(), tc.message) ||
					!strings.Contains(err.Error(), fmt.Sprintf("line %d (seq %d)", ie.Seq, ie.Seq)) {
					t.Errorf("%s: %v; want seq %d: %q", name, err, tc.seq, tc.message)
				}
			}
			if after, _ := os.ReadFile(filepath.Join(dir, EventsFile)); string(after) != string(before) {
				t.Error("Open wrote to a record it refused")
			}
		})
	}
}

// A crash never reads as tampering: lines appended after the last Sync
// are beyond the head, and a torn last line is cut by Open, which goes on
// chaining.
func TestChainSurvivesCrashes(t *testing.T) {
	dir := t.TempDir()
	l, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		l.Append("x", "a", nil)
	}
	l.Sync()
	l.Append("y", "a", nil) // not synced: the process dies here
	f, _ := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":5,"time":"2026-`)
	f.Close()
	c, err := ReadChecked(dir)
	if err != nil || !c.TornTail || c.Integrity.HeadSeq != 3 || len(c.Events) != 4 {
		t.Fatalf("after a crash: %d events, torn %v, head %d, %v", len(c.Events), c.TornTail, c.Integrity.HeadSeq, err)
	}
	l2, _, repaired, err := Open(dir, nil)
	if err != nil || !repaired {
		t.Fatalf("open after a crash: repaired %v, %v", repaired, err)
	}
	l2.Append(TypeResumed, "", nil)
	l2.Close()
	if c, err := ReadChecked(dir); err != nil || c.Integrity.HeadSeq != 5 || c.Integrity.From != 1 {
		t.Fatalf("resumed: %+v %v", c.Integrity, err)
	}
}

// A record written before the chain reads unchecked; a resume by this
// version chains it from the resumed event on, and from then on its end is
// checked.
func TestChainOfAnOlderRecord(t *testing.T) {
	dir := t.TempDir()
	var old []string
	for i := 1; i <= 3; i++ {
		old = append(old, fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","type":"x","agent":""}`, i))
	}
	os.WriteFile(filepath.Join(dir, EventsFile), []byte(strings.Join(old, "\n")+"\n"), 0o644)
	c, err := ReadChecked(dir)
	if err != nil || c.Integrity.Chained || !c.Integrity.Head.Missing {
		t.Fatalf("an unchained record: %+v %v", c.Integrity, err)
	}
	l, _, _, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(TypeResumed, "", nil)
	l.Close()
	c, err = ReadChecked(dir)
	if err != nil || !c.Integrity.Chained || c.Integrity.From != 4 || c.Integrity.HeadSeq != 4 {
		t.Fatalf("after a resume: %+v %v", c.Integrity, err)
	}
	editLines(t, dir, func(l []string) []string { l[2] = strings.Replace(l[2], `"x"`, `"z"`, 1); return l })
	if _, err := ReadChecked(dir); err == nil || !strings.Contains(err.Error(), "line 4 (seq 4)") {
		t.Fatalf("the line the chain began after was edited: %v", err)
	}
}

// Cut keeps the record intact (a kill after n lines); Reseal makes any
// edit intact again, which is the chain's limit: it has no key.
func TestCutAndReseal(t *testing.T) {
	dir := chained(t, 6)
	if err := Cut(dir, 4); err != nil {
		t.Fatal(err)
	}
	c, err := ReadChecked(dir)
	if err != nil || len(c.Events) != 4 || c.Integrity.HeadSeq != 4 {
		t.Fatalf("after Cut: %d events, %+v, %v", len(c.Events), c.Integrity, err)
	}
	editLines(t, dir, func(l []string) []string { l[1] = strings.Replace(l[1], "event 2", "edited", 1); return l })
	if _, err := ReadChecked(dir); err == nil {
		t.Fatal("an edit went unnoticed")
	}
	if err := Reseal(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadChecked(dir); err != nil {
		t.Fatalf("after Reseal: %v", err)
	}
}

// A garbled line is named by its number by every reader.
func TestGarbledLinesAreNamed(t *testing.T) {
	dir := chained(t, 4)
	editLines(t, dir, func(l []string) []string { l[0] = "{garbled"; return l })
	if _, err := First(dir); err == nil || !strings.Contains(err.Error(), "line 1 (seq 1 expected) is garbled") {
		t.Errorf("First: %v", err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "line 1 (seq 1 expected) is garbled") {
		t.Errorf("Read: %v", err)
	}
	for _, err := range Follow(t.Context(), dir, 0) {
		if err == nil || !strings.Contains(err.Error(), "line 1 (seq 1 expected) is garbled") {
			t.Errorf("Follow: %v", err)
		}
		break
	}
	dir = chained(t, 4)
	editLines(t, dir, func(l []string) []string { l[3] = `{"seq":4,"ti` + "\x00"; return l })
	if _, err := Last(dir); err == nil || !strings.Contains(err.Error(), "line 4 (the last complete one) is garbled") {
		t.Errorf("Last: %v", err)
	}
	if _, _, _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), "line 4 (seq 4 expected) is garbled") {
		t.Errorf("Open: %v", err)
	}
}
