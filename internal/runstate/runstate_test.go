package runstate_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// builder writes a record with the real Log, so lines are what runs write.
type builder struct {
	t   *testing.T
	dir string
	log *record.Log
}

func newBuilder(t *testing.T) *builder {
	t.Helper()
	dir := t.TempDir()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log, err := record.Create(dir, func() time.Time { clock = clock.Add(time.Second); return clock })
	if err != nil {
		t.Fatal(err)
	}
	return &builder{t: t, dir: dir, log: log}
}

func (b *builder) add(typ, agent string, payload any) *builder {
	b.t.Helper()
	if _, err := b.log.Append(typ, agent, payload); err != nil {
		b.t.Fatal(err)
	}
	return b
}

func (b *builder) load() *runstate.Loaded {
	b.t.Helper()
	b.log.Close()
	st, err := runstate.Load(b.dir)
	if err != nil {
		b.t.Fatal(err)
	}
	return st
}

func usage(p, c int) llm.Usage {
	return llm.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c, Reported: true}
}

func TestUsageSumsEveryAgent(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Tools: []string{"dispatch"}})
	b.add(record.TypeModelResponse, "lead", record.ModelResponse{Turn: 1, Usage: usage(100, 10)})
	b.add(record.TypeAssignment, "lead", record.Assignment{Assignment: "A1", Item: "T1", Role: "summer", State: "created"})
	b.add(record.TypeAssignment, "A1", record.Assignment{Assignment: "A1", Item: "T1", State: "queued"})
	b.add(record.TypeModelResponse, "A1", record.ModelResponse{Turn: 1, Usage: usage(50, 5)})
	b.add(record.TypeModelResponse, "verifier", record.ModelResponse{Turn: 1, Usage: usage(30, 3)})
	b.add(record.TypeModelResponse, "summarizer", record.ModelResponse{Turn: 1, Usage: usage(20, 2)})
	b.add(record.TypeAssignment, "A1", record.Assignment{Assignment: "A1", Item: "T1", State: "failed", Reason: "budget"})
	b.add(record.TypeAssignment, "A1", record.Assignment{Assignment: "A1", Item: "T1", State: "cancelled"})
	st := b.load()
	if st.Usage.PromptTokens != 200 || st.Usage.CompletionTokens != 20 || st.Usage.TotalTokens != 220 || st.Turns != 4 {
		t.Errorf("total usage %+v over %d turns, want 200+20 over 4", st.Usage, st.Turns)
	}
	want := map[string]int{"lead": 110, "A1": 55, "verifier": 33, "summarizer": 22}
	for id, tokens := range want {
		if a := st.Agent(id); a == nil || a.Usage.TotalTokens != tokens || a.Turns != 1 {
			t.Errorf("agent %s: %+v, want %d tokens in 1 turn", id, a, tokens)
		}
	}
	if st.Mode() != "team" {
		t.Errorf("mode %q", st.Mode())
	}
	a := st.AssignmentByID("A1")
	if a == nil || a.Role != "summer" || a.State != "cancelled" || a.Reason != "budget" || !a.Ended() ||
		strings.Join(a.Lifecycle, " ") != "created queued failed cancelled" {
		t.Errorf("assignment %+v", a)
	}
	if ag := st.Agent("A1"); ag.Queued.IsZero() || ag.Role != "summer" {
		t.Errorf("subagent %+v: want queued and its role", ag)
	}
}

func TestLeaseControlsContractsBoard(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
	b.add(record.TypeContract, "", record.Contract{Objective: "o", Hash: "h1"})
	b.add(record.TypeLease, "main", record.Lease{Action: "granted", Holder: "main", Paths: []string{"/outputs/b", "/outputs/a"}})
	b.add(record.TypeMessage, "user", record.Message{ID: "M1", Text: "pause", Control: "pause"})
	b.add(record.TypeControl, "user", record.Control{ID: "C1", Kind: "budget", Args: map[string]string{"turns": "+5"}})
	b.add(record.TypeContract, "user", record.Contract{Objective: "o2", Hash: "h2", Version: 2, Message: "M2", Text: "also /outputs/c"})
	b.add(record.TypeBoard, "lead", record.Board{Op: "add", ID: "T1", Title: new("t"), Objective: new("o")})
	b.add(record.TypeBoard, "lead", record.Board{Op: "resolve", ID: "T9"}) // refused: no T9
	b.add(record.TypeLease, "main", record.Lease{Action: "released", Holder: "main"})
	st := b.load()
	if st.Lease.Holder != "" || strings.Join(st.Lease.Manifest, ",") != "/outputs/a,/outputs/b" || len(st.Lease.Events) != 2 {
		t.Errorf("lease %+v", st.Lease)
	}
	if !st.Paused || len(st.Controls) != 2 || !st.Controls[0].FromMessage || st.Controls[1].Args["turns"] != "+5" {
		t.Errorf("paused %v controls %+v", st.Paused, st.Controls)
	}
	if len(st.Contracts) != 2 || st.Contract().Hash != "h2" || st.Contract().Seq != 6 {
		t.Errorf("contracts %+v", st.Contracts)
	}
	var be *runstate.BoardError
	if st.Board.Len() != 1 || st.BoardEvents != 2 || !errors.As(st.BoardErr, &be) || be.Seq != 8 {
		t.Errorf("board: %d items, %d events, error %v", st.Board.Len(), st.BoardEvents, st.BoardErr)
	}
}

func TestUnknownTypesAreSkipped(t *testing.T) {
	b := newBuilder(t)
	b.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
	b.add("hologram", "main", struct {
		X int `json:"x"`
	}{1})
	b.add(record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "bash"})
	st := b.load()
	if st.ToolCalls != 1 || len(st.Unknown) != 1 || st.Unknown[0].Seq != 2 || len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0], `"hologram"`) {
		t.Fatalf("tool calls %d unknown %+v skipped %v", st.ToolCalls, st.Unknown, st.Skipped)
	}
	if err := st.CheckResumable(); err == nil || !strings.Contains(err.Error(), `"hologram" (seq 2)`) {
		t.Fatalf("resumable: %v", err)
	}
}

func TestApplyRefusesOutOfOrder(t *testing.T) {
	st := runstate.New()
	e := record.Event{Seq: 2, Type: record.TypeWarning, Raw: []byte(`{}`)}
	if err := st.Apply(e); !errors.Is(err, runstate.ErrOrder) {
		t.Fatalf("seq 2 first: %v", err)
	}
	bad := record.Event{Seq: 1, Type: record.TypeToolCall, Raw: []byte(`{"turn":"one"}`)}
	if err := st.Apply(bad); err == nil || !strings.Contains(err.Error(), "seq 1") || st.Seq != 0 {
		t.Fatalf("undecodable payload: %v (seq now %d)", err, st.Seq)
	}
}

func writeRecord(t *testing.T, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, record.EventsFile), []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadNamesTheBadLine(t *testing.T) {
	ok := func(seq int) string {
		return fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","type":"warning","agent":"","code":"x","message":"m"}`+"\n", seq)
	}
	cases := []struct {
		name  string
		lines []string
		want  string
	}{
		{"garbled", []string{ok(1), "{not json\n", ok(3)}, "line 2 (seq 2 expected) is garbled"},
		{"gap", []string{ok(1), ok(3)}, "line 2 has seq 3, want 2"},
		{"too long", []string{ok(1), `{"seq":2,"type":"warning","message":"` + strings.Repeat("x", record.MaxLine) + "\"}\n", ok(3)}, "line 2 (seq 2 expected)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := runstate.Load(writeRecord(t, c.lines...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to say %q", err, c.want)
			}
		})
	}
	st, err := runstate.Load(writeRecord(t, ok(1), `{"seq":2,"ty`))
	if err != nil || !st.TornTail || st.Events != 1 {
		t.Fatalf("torn tail: %v, %+v", err, st)
	}
}

// A record line over the cap is refused without reading all of it into memory.
func TestLongLineIsNotHeld(t *testing.T) {
	line := append([]byte(`{"seq":1,"type":"warning","message":"`), bytes.Repeat([]byte("y"), 100<<20)...)
	var m0, m1 runtimeMem
	m0.read()
	_, err := runstate.Read(bytes.NewReader(line))
	m1.read()
	if !errors.Is(err, record.ErrLineTooLong) {
		t.Fatalf("err %v", err)
	}
	if grown := m1.total - m0.total; grown > 2*record.MaxLine+(16<<20) {
		t.Errorf("reading a 100 MiB line allocated %d MiB; the cap is %d MiB", grown>>20, record.MaxLine>>20)
	}
}
