package replay

import (
	"fmt"
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

func TestEnvelopeAndStepLines(t *testing.T) {
	for _, c := range []struct {
		line, typ, agent string
		ok               bool
	}{
		{`{"seq":3,"time":"2026-01-01T00:00:00Z","type":"tool_result","agent":"A1","name":"wait"}`, "tool_result", "A1", true},
		{`{"seq":3,"time":"2026-01-01T00:00:00Z","type":"run_started","agent":"","x":1}`, "run_started", "", true},
		{`{"agent":"lead","type":"board","seq":9}`, "board", "lead", true}, // not the record's order: decoded in full
		{`not json`, "", "", false},
	} {
		typ, agent, ok := envelope([]byte(c.line))
		if typ != c.typ || agent != c.agent || ok != c.ok {
			t.Errorf("envelope(%s) = %q %q %v", c.line, typ, agent, ok)
		}
	}
	if a, ok := stepAgent([]byte("[A12] turn 3 bash {} -> ok exit code: 0\n")); !ok || a != "A12" {
		t.Errorf("stepAgent: %q %v", a, ok)
	}
	if _, ok := stepAgent([]byte("apodex: run x with replay model\n")); ok {
		t.Error("a run line read as a step")
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
	d, cnt := compare(orig, newSide("/o", orig), newSide("/r", rep))
	if d == nil || d.Kind != KindToolCall || d.Seq != 1 || !d.After || d.Agent != "A1" {
		t.Fatalf("divergence %+v (compared %+v)", d, cnt)
	}
	rep[2] = ev(3, record.TypeToolCall, "A2", call) // no extra: the A2 result differs at seq 4
	rep = append(rep[:3], rep[4:]...)
	if d, _ := compare(orig, newSide("/o", orig), newSide("/r", rep)); d == nil || d.Kind != KindObservation || d.Seq != 4 || d.Expected != `bash : "y"` || d.Got != `"z"` {
		t.Fatalf("divergence %+v", d)
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
		d := compareNotices(o, r)
		if (d == nil) != (c.seq == 0) || d != nil && d.Seq != c.seq {
			t.Errorf("%s: divergence %+v, want at seq %d", c.name, d, c.seq)
		}
		var tr record.ToolResult
		c.replay[len(c.replay)-1].Decode(&tr)
		if got := leadWait("lead", tr); got != c.waitsOK {
			t.Errorf("%s: last wait result covered by the stream: %v", c.name, got)
		}
	}
}
