package transcript

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// events writes payloads into a fresh record and reads them back.
func events(t *testing.T, add func(l *record.Log)) (string, []record.Event) {
	t.Helper()
	dir := t.TempDir()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := record.Create(dir, func() time.Time { clock = clock.Add(time.Second); return clock })
	if err != nil {
		t.Fatal(err)
	}
	add(l)
	l.Close()
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c.Events
}

func TestEntriesAndText(t *testing.T) {
	long := strings.Repeat("line\n", 100)
	dir, evs := events(t, func(l *record.Log) {
		l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r1", Objective: "Sum it", Model: record.ModelSettings{Provider: "scripted", Name: "scripted"}, Sandbox: record.SandboxSettings{Kind: "bwrap"}})
		msg, _ := json.Marshal(llm.Message{Role: llm.RoleAssistant, Content: "I will sum it.\nThen report."})
		l.Append(record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Message: msg, Usage: llm.Usage{TotalTokens: 1500}})
		l.Append(record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "bash", Arguments: `{"command":"awk 'NR>1' data.csv"}`})
		ref, _ := l.PutBlob([]byte(long))
		l.Append(record.TypeToolResult, "main", record.ToolResult{Turn: 1, CallID: "c1", Name: "bash", Output: "line\nline\n[cut]", FullRef: ref, FullBytes: len(long)})
		l.Append("message", "user", map[string]any{"id": "M1", "text": "Also a chart.", "class": "correction", "sender": "ann", "to": "main"})
		l.Append("control", "user", map[string]any{"id": "C1", "kind": "budget", "args": map[string]string{"turns": "+5"}, "result": "budget changed: turns=+5"})
		l.Append(record.TypeCompaction, "main", record.Compaction{Tier: 1, TokensBefore: 9000, TokensAfter: 4000, Window: 10000, Evicted: []string{"c0"}})
		l.Append("board", "lead", map[string]any{"op": "add", "id": "T1", "title": "North", "by": "lead"})
		l.Append("verdict", "verifier", map[string]any{"claim": "north is 3", "verdict": "supported", "reason": "the file says so"})
		l.Append("from_the_future", "", map[string]any{"x": 1})
		l.Append(record.TypeRunFinished, "", record.RunFinished{Status: "completed", Termination: "completed", Turns: 1, Summary: "done"})
	})
	var all []Entry
	for _, e := range evs {
		all = append(all, Entries(e, Options{})...)
	}
	kinds := make([]string, len(all))
	for i, x := range all {
		kinds[i] = x.Kind
	}
	want := "run_started assistant tool_call tool_result user control compaction board verdict event run_finished"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("kinds\n got %s\nwant %s", got, want)
	}
	if u := all[4]; u.Agent != "main" || u.Class != "correction" || u.Text != "Also a chart." {
		t.Errorf("user message entry %+v", u)
	}
	if r := all[3]; r.FullBytes != len(long) || strings.Count(r.Output, "line") != 2 {
		t.Errorf("clipped result %+v", r)
	}
	if full := Entries(evs[3], Options{Full: true, Dir: dir}); full[0].Output != long || full[0].FullBytes != 0 {
		t.Errorf("--full result has %d bytes", len(full[0].Output))
	}
	var b strings.Builder
	w := &Writer{W: &b}
	for _, x := range all {
		w.Write(x)
	}
	out := b.String()
	for _, s := range []string{"── run", "── main", "assistant (turn 1): I will sum it.\n  Then report.", "▸ bash $ awk 'NR>1' data.csv",
		"(the model saw 15 of 500 bytes", "user (correction, M1 from ann): Also a chart.", "control budget turns=+5: budget changed",
		"compaction tier 1: 9000 → 4000 tokens", `board add T1 "North" (by lead)`, "verdict supported: the file says so: north is 3",
		"event from_the_future", "finished completed (completed)"} {
		if !strings.Contains(out, s) {
			t.Errorf("text lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("escape codes without colour")
	}
	b.Reset()
	(&Writer{W: &b, Style: Style{Color: true}}).Write(all[3])
	if !strings.Contains(b.String(), "\x1b[32mok\x1b[0m") {
		t.Errorf("no colour with Color: %q", b.String())
	}
}

func TestArgsAndClip(t *testing.T) {
	if got := Args("bash", `{"command":"ls -l"}`, false, 80); got != "$ ls -l" {
		t.Errorf("bash: %q", got)
	}
	if got := Args("write_file", `{"path":"/a","content":"x y"}`, false, 80); got != `content="x y" path=/a` {
		t.Errorf("write_file: %q", got)
	}
	if got := Args("x", `not json`, false, 3); got != "not…" {
		t.Errorf("bad json: %q", got)
	}
	if got := Args("x", `{"a":"ééééé"}`, false, 4); !strings.HasSuffix(got, "…") || !utf8Valid(got) {
		t.Errorf("clip inside a rune: %q", got)
	}
	if got := ClipLines(strings.Repeat("a\n", 20), 3, 1000); !strings.HasPrefix(got, "a\na\na\n…") || !strings.Contains(got, "20 lines") {
		t.Errorf("ClipLines: %q", got)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

// Every event type this version knows reads in words: it gives entries of
// a kind of its own (never the "event" of a type from the future) or is
// Quiet, and the text form names no kind in snake_case ("event
// text_finish", "corpus_index").
func TestEveryTypeInWords(t *testing.T) {
	snake := regexp.MustCompile(`\b[a-z]+_[a-z_]+\b`)
	for _, typ := range record.Types() {
		if slices.Contains(Quiet, typ) {
			continue
		}
		raw, _ := json.Marshal(map[string]any{"in_flight": map[string][]string{"main": {"bash c1"}}})
		xs := Entries(record.Event{Seq: 1, Type: typ, Agent: "main", Raw: raw}, Options{})
		if len(xs) == 0 {
			t.Errorf("%s: no entry, and not Quiet", typ)
			continue
		}
		var b strings.Builder
		w := &Writer{W: &b}
		for _, x := range xs {
			if x.Kind == KindEvent {
				t.Errorf("%s: rendered as an unknown event", typ)
			}
			w.Write(x)
		}
		if m := snake.FindString(b.String()); m != "" {
			t.Errorf("%s reads %q:\n%s", typ, m, b.String())
		}
	}
}
