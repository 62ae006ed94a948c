package divergence

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

func TestNormalization(t *testing.T) {
	n := normalizer{dirs: []string{"/home/u/.apodex/runs/r1"}}
	cases := []struct{ in, want string }{
		{"wrote /home/u/.apodex/runs/r1/outputs/x", "wrote <RUN>/outputs/x"},
		{"at 2026-11-30T05:52:24.376725247Z and 2026-01-02T03:04:05+01:00", "at <TIME> and <TIME>"},
		{"it took 12ms, then took 1.5 s", "it took <DUR>, then took <DUR>"},
		{"staging/outputs-123456/a", "staging/outputs-<TMP>/a"},
		{"/workspace/.a.txt.apodex-merge-0f3a9b and .b.apodex-x7Yq2", "/workspace/.a.txt.apodex-<TMP> and .b.apodex-<TMP>"},
		{"blobs/.tmp-99887766", "blobs/.tmp-<TMP>"},
		// Kept exact: numbers that are not durations, dates that are not RFC 3339.
		{"sum=6637.00 rows=12, 1732950000123456789, Nov 30 05:52", "sum=6637.00 rows=12, 1732950000123456789, Nov 30 05:52"},
		{"outputs-final.txt", "outputs-final.txt"},
	}
	for _, c := range cases {
		if got := n.text(c.in); got != c.want {
			t.Errorf("text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	zero := 0
	m := n.meta(&record.ToolMeta{DurationMS: 12, ExitCode: &zero, SnapshotError: "/home/u/.apodex/runs/r1/workspace: gone"})
	if m.DurationMS != 0 || *m.ExitCode != 0 || m.SnapshotError != "<RUN>/workspace: gone" {
		t.Errorf("meta %v", m)
	}
}

// An event the replay made and the original did not sits just after its

// stream's last original event, and is reported when that comes first.

func TestCompareExtraEventsPosition(t *testing.T) {
	ev := func(seq int64, typ, agent, body string) record.Event {
		raw := fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","type":%q,"agent":%q%s}`, seq, typ, agent, body)
		return record.Event{Seq: seq, Type: typ, Agent: agent, Raw: []byte(raw)}
	}
	call := `,"name":"bash","arguments":"{}"`
	result := func(out string) string { return fmt.Sprintf(`,"name":"bash","output":%q`, out) }
	orig := []record.Event{
		ev(1, record.TypeToolCall, "A1", call), ev(2, record.TypeToolResult, "A1", result("x")),
		ev(3, record.TypeToolCall, "A2", call), ev(4, record.TypeToolResult, "A2", result("y")),
	}
	rep := []record.Event{
		ev(1, record.TypeToolCall, "A1", call), ev(2, record.TypeToolResult, "A1", result("x")),
		ev(3, record.TypeToolCall, "A1", call), // extra, after A1's call at seq 1
		ev(4, record.TypeToolCall, "A2", call), ev(5, record.TypeToolResult, "A2", result("z")),
	}
	// Both are reported, in the original's order, each with its class: the
	// comparison goes on past the first.
	ds, cnt := compare(orig, newSide("/o", orig), newSide("/r", rep))
	if len(ds) != 2 {
		t.Fatalf("divergences %+v (compared %+v)", ds, cnt)
	}
	if d := ds[0]; d.Kind != KindToolCall || d.Class != ClassPolicy || d.Seq != 1 || !d.After || d.Agent != "A1" {
		t.Errorf("first divergence %+v", d)
	}
	if d := ds[1]; d.Kind != KindObservation || d.Class != ClassEnvironment || d.Seq != 4 || d.Expected != `bash : "y"` || d.Got != `"z"` {
		t.Errorf("second divergence %+v", d)
	}
	rep[2] = ev(3, record.TypeToolCall, "A2", call) // no extra: the A2 result differs at seq 4
	rep = append(rep[:3], rep[4:]...)
	if ds, _ := compare(orig, newSide("/o", orig), newSide("/r", rep)); len(ds) != 1 || ds[0].Seq != 4 {
		t.Fatalf("divergences %+v", ds)
	}
}

func TestLeadNoticeStream(t *testing.T) {
	ns, ok := splitNotices("Assignment A1 (x) on T1 ended: reported.\nSummary: a\n\nb\n\nAssignment A12 (y) on T2 ended: failed.")
	if !ok || len(ns) != 2 || ns[0] != "Assignment A1 (x) on T1 ended: reported.\nSummary: a\n\nb" || ns[1] != "Assignment A12 (y) on T2 ended: failed." {
		t.Fatalf("split: %v %q", ok, ns)
	}
	if _, ok := splitNotices("no assignment ended within 5s"); ok {
		t.Fatal("a timeout read as notices")
	}
	ev := func(seq int64, typ, body string) record.Event {
		return record.Event{Seq: seq, Type: typ, Agent: "lead", Raw: []byte(fmt.Sprintf(`{"seq":%d,"type":%q,"agent":"lead"%s}`, seq, typ, body))}
	}
	wait := func(seq int64, out string) record.Event {
		return ev(seq, record.TypeToolResult, fmt.Sprintf(`,"name":"wait","output":%q`, out))
	}
	obs := func(seq int64, text string) record.Event {
		return ev(seq, record.TypeObservation, fmt.Sprintf(`,"kind":"assignments","text":%q`, text))
	}
	a1, a2 := "Assignment A1 (n) on T1 ended: reported.", "Assignment A2 (s) on T2 ended: reported."
	orig := []record.Event{wait(10, a1+"\n\n"+a2), wait(20, "nothing to wait for: none of these assignments is queued or running.")}
	cases := []struct {
		name    string
		replay  []record.Event
		seq     int64 // of the divergence; 0 for none
		waitsOK bool  // the wait results themselves pass the per-call comparison
	}{
		{"same grouping", []record.Event{wait(10, a1+"\n\n"+a2), wait(20, "nothing to wait for: none")}, 0, true},
		{"told in two waits", []record.Event{wait(10, a1), wait(20, a2)}, 0, true},
		{"told at the next turn", []record.Event{wait(10, a1), obs(15, a2), wait(20, "nothing to wait for: none")}, 0, true},
		{"another order", []record.Event{wait(10, a2), wait(20, a1)}, 10, true},
		{"one never told", []record.Event{wait(10, a1), wait(20, "no assignment ended within 600s")}, 10, false},
	}
	for _, c := range cases {
		o, r := newSide("/o", orig), newSide("/r", c.replay)
		ds := compareNotices(o, r)
		if (len(ds) == 0) != (c.seq == 0) || len(ds) > 0 && (ds[0].Seq != c.seq || ds[0].Class != ClassPolicy) {
			t.Errorf("%s: divergences %+v, want the first at seq %d", c.name, ds, c.seq)
		}
		var tr record.ToolResult
		c.replay[len(c.replay)-1].Decode(&tr)
		if got := leadWait("lead", tr); got != c.waitsOK {
			t.Errorf("%s: last wait result covered by the stream: %v", c.name, got)
		}
	}
}

// Rules 8-11: what a command prints that cannot repeat, and what it must

// not hide.

func TestNoise(t *testing.T) {
	cases := []struct {
		name  string
		a, b  string
		same  bool
		rules string
	}{
		{"ls -l", "total 4\n-rw-r--r-- 1 nobody nogroup 7 Dec  2 02:58 data.csv\ndrwxr-xr-x 2 nobody nogroup 40 Dec  2 02:58 sub\n",
			"total 4\n-rw-r--r-- 1 nobody nogroup 7 Dec 12 13:01 data.csv\ndrwxr-xr-x 2 nobody nogroup 40 Jan  1  2025 sub\n", true, "file times"},
		{"ls -ln -o", "-rw-r--r-- 1 65534 7 Dec  2 02:58 a\n", "-rw-r--r-- 1 65534 7 Dec  2 03:00 a\n", true, "file times"},
		{"ls -lh", "-rw-r--r-- 1 u g 1.5K Dec  2 02:58 a\n", "-rw-r--r-- 1 u g 1.5K Dec  2 03:00 a\n", true, "file times"},
		{"ls --full-time", "-rw-r--r-- 1 u g 7 2026-12-02 02:58:29.466615613 +0000 a\n", "-rw-r--r-- 1 u g 7 2026-12-02 03:01:00.000000001 +0000 a\n", true, "file times"},
		{"ls -li, widths", " 998183 -rw-r--r-- 1 u g 7 Dec  2 02:58 a\n1000012 -rw-r--r-- 1 u g 7 Dec  2 02:58 b\n",
			"10001234 -rw-r--r-- 1 u g 7 Dec  2 03:00 a\n10001235 -rw-r--r-- 1 u g 7 Dec  2 03:00 b\n", true, "file times, inode numbers"},
		{"ls -lt reorders", "-rw-r--r-- 1 u g 7 Dec  2 02:58 a\n-rw-r--r-- 1 u g 9 Dec  2 02:57 b\n",
			"-rw-r--r-- 1 u g 9 Dec  2 03:00 b\n-rw-r--r-- 1 u g 7 Dec  2 03:00 a\n", true, "file times, line order"},
		{"stat", "  File: a\n  Size: 7         \tBlocks: 8\nDevice: 254,0\tInode: 9981830     Links: 1\nAccess: 2026-12-02 02:58:29.468010455 +0000\nModify: 2026-12-02 02:58:29.466615613 +0000\n Birth: 2026-12-02 02:58:29.466615613 +0000\n",
			"  File: a\n  Size: 7         \tBlocks: 8\nDevice: 0,66\tInode: 10002569    Links: 1\nAccess: 2026-12-02 03:01:29.1 +0000\nModify: 2026-12-02 03:01:29.2 +0000\n Birth: 2026-12-02 03:01:29.2 +0000\n", true, "clock times, inode numbers, device numbers"},
		{"date", "Wed Dec  2 02:58:29 UTC 2026\n", "Wed Dec  2 03:01:00 UTC 2026\n", true, "clock times"},
		// Kept: what the files say, their sizes, names and modes.
		{"a size", "-rw-r--r-- 1 u g 7 Dec  2 02:58 a\n", "-rw-r--r-- 1 u g 8 Dec  2 03:00 a\n", false, ""},
		{"a name", "-rw-r--r-- 1 u g 7 Dec  2 02:58 a\n", "-rw-r--r-- 1 u g 7 Dec  2 03:00 b\n", false, ""},
		{"a mode", "-rw-r--r-- 1 u g 7 Dec  2 02:58 a\n", "-rwxr-xr-x 1 u g 7 Dec  2 03:00 a\n", false, ""},
		{"a sum", "sum=6637.00\n", "sum=6637.01\n", false, ""},
		{"epoch nanoseconds", "1764644309466615613\n", "1764644309466615999\n", false, ""},
		{"a line more", "a\nb\n", "a\nb\nb\n", false, ""},
	}
	for _, c := range cases {
		same, rules := noiseEqual(c.a, c.b)
		if same != c.same || same && strings.Join(rules, ", ") != c.rules {
			t.Errorf("%s: same %v by %q, want %v by %q", c.name, same, rules, c.same, c.rules)
		}
	}
}

// Rule 7: a URL's page served from the record is the page fetched when its

// evidence (id, source, lines, hash) is the same.

func TestFetchedURLComparedByEvidence(t *testing.T) {
	orig := record.ToolResult{Name: "fetch", CallID: "c1", Output: "     1\tThe ferry is suspended.\n[https://example.org/notice: lines 1-1 of 1]\n[evidence E1: https://example.org/notice lines 1-1, sha256:913d0ebfae2d…]"}
	served := record.ToolResult{Name: "fetch", CallID: "c1", Output: "     1\tThe ferry is suspended.\n[https://example.org/notice: lines 1-1, served from the record]\n[evidence E1: https://example.org/notice lines 1-1, sha256:913d0ebfae2d…]"}
	o, r := newSide("/o", nil), newSide("/r", nil)
	if _, _, differ := resultDiff("main", orig, served, o, r, false); differ {
		t.Error("the page served from the record differs from the page fetched")
	}
	other := served
	other.Output = strings.Replace(served.Output, "913d0ebfae2d", "000000000000", 1)
	if _, _, differ := resultDiff("main", orig, other, o, r, false); !differ {
		t.Error("a page with other evidence passed")
	}
	corpus := record.ToolResult{Name: "fetch", CallID: "c1", Output: "     1\tx\n[/inputs/corpus/a.md: lines 1-1 of 1]\n[evidence E1: /inputs/corpus/a.md lines 1-1, sha256:aa…]"}
	changed := corpus
	changed.Output = strings.Replace(corpus.Output, "\tx", "\ty", 1)
	if _, _, differ := resultDiff("main", corpus, changed, o, r, false); !differ {
		t.Error("a corpus page is compared by its evidence only")
	}
}

// Classes: a host tool's result is the environment's, a coordination

// tool's the policy's, a difference in file times nondeterministic output,

// a result missing (the call did not run) the policy's.

func TestDivergenceClasses(t *testing.T) {
	ev := func(seq int64, typ, body string) record.Event {
		raw := fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","type":%q,"agent":"lead"%s}`, seq, typ, body)
		return record.Event{Seq: seq, Type: typ, Agent: "lead", Raw: []byte(raw)}
	}
	result := func(seq int64, id, name, out string) record.Event {
		return ev(seq, record.TypeToolResult, fmt.Sprintf(`,"call_id":%q,"name":%q,"output":%q`, id, name, out))
	}
	orig := []record.Event{
		result(1, "c1", "bash", "-rw-r--r-- 1 u g 7 Dec  2 02:58 a\n"),
		result(2, "c2", "bash", "42\n"),
		result(3, "c3", "board_view", "T1 open"),
		result(4, "c4", "read_file", "x"),
	}
	rep := []record.Event{
		result(1, "c2", "bash", "43\n"), // by call id, not by place
		result(2, "c1", "bash", "-rw-r--r-- 1 u g 7 Dec  2 03:00 a\n"),
		result(3, "c3", "board_view", "T1 done"),
	}
	ds, _ := compare(orig, newSide("/o", orig), newSide("/r", rep))
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%d %s", d.Seq, d.Class))
	}
	want := "1 nondeterministic_output, 2 environment, 3 policy, 4 policy" // 4: the call did not run
	if strings.Join(got, ", ") != want {
		t.Fatalf("divergences %q, want %q", got, want)
	}
}
