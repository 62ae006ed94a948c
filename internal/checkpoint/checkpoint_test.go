package checkpoint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// writer builds a record by hand, the way the agent loop writes one.
type writer struct {
	t   *testing.T
	dir string
	log *record.Log
}

func newWriter(t *testing.T) *writer {
	t.Helper()
	dir := t.TempDir()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return &writer{t: t, dir: dir, log: log}
}

func (w *writer) add(typ, agent string, payload any) {
	w.t.Helper()
	if _, err := w.log.Append(typ, agent, payload); err != nil {
		w.t.Fatal(err)
	}
}

func raw(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (w *writer) request(agent string, turn, from int, msgs ...any) {
	var rs []json.RawMessage
	for _, m := range msgs {
		rs = append(rs, raw(w.t, m))
	}
	w.add(record.TypeModelRequest, agent, record.ModelRequest{Turn: turn, From: from, Messages: rs})
}

func (w *writer) response(agent string, turn int, m llm.Message) {
	m.Role = llm.RoleAssistant
	w.add(record.TypeModelResponse, agent, record.ModelResponse{Turn: turn, Message: raw(w.t, m), Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12, Reported: true}})
}

func (w *writer) agents() map[string]*Agent {
	w.t.Helper()
	c, err := record.Read(w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	a, err := Agents(w.dir, c.Events)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func sys() llm.Message  { return llm.Message{Role: llm.RoleSystem, Content: "system"} }
func task() llm.Message { return llm.Message{Role: llm.RoleUser, Content: "task"} }

func TestInterruptedToolCallAndTail(t *testing.T) {
	w := newWriter(t)
	w.request("main", 1, 0, sys(), task())
	w.response("main", 1, llm.Message{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{}`}, {ID: "c2", Name: "bash", Arguments: `{"command":"sleep 9"}`}}})
	w.add(record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "read_file"})
	w.add(record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c2", Name: "bash"})
	w.add(record.TypeToolResult, "main", record.ToolResult{Turn: 1, CallID: "c1", Name: "read_file", Output: "contents"})
	w.add("message", "user", map[string]any{"id": "M1", "text": "hurry", "class": "priority_change", "to": "main"})
	w.add("message", "user", map[string]any{"id": "M2", "text": "pause", "class": "pause_resume_cancel", "to": "main", "control": "pause"})
	a := w.agents()["main"]
	if a.Turns != 1 || a.ToolCalls != 2 || a.AwaitingModel || a.Finished != nil {
		t.Fatalf("counters %+v", a)
	}
	h := a.History
	if len(h) != 6 {
		t.Fatalf("history has %d messages, want 6: %+v", len(h), h)
	}
	if h[3].ToolCallID != "c1" || h[3].Content != "contents" {
		t.Errorf("first result %+v", h[3])
	}
	if h[4].ToolCallID != "c2" || !h[4].IsError || !strings.HasPrefix(h[4].Content, llm.InterruptedMarker) {
		t.Errorf("interrupted result %+v", h[4])
	}
	if h[5].Content != UserMessage("M1", "priority_change", "hurry") {
		t.Errorf("user message %q (a control message must not be replayed into the history)", h[5].Content)
	}
	if len(a.Interrupted) != 1 || a.Interrupted[0].ID != "c2" {
		t.Errorf("interrupted %+v", a.Interrupted)
	}
}

func TestModelCallInFlightIsMadeAgain(t *testing.T) {
	w := newWriter(t)
	w.request("main", 1, 0, sys(), task())
	w.response("main", 1, llm.Message{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{}`}}})
	w.add(record.TypeToolResult, "main", record.ToolResult{CallID: "c1", Name: "read_file", Output: "x"})
	w.request("main", 2, 3, llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_file", Content: "x"})
	a := w.agents()["main"]
	if !a.AwaitingModel || len(a.History) != 4 || len(a.Interrupted) != 0 {
		t.Fatalf("awaiting %v, history %d, interrupted %d", a.AwaitingModel, len(a.History), len(a.Interrupted))
	}
	if st := Stopped(map[string]*Agent{"main": a}); len(st["main"]) != 1 || st["main"][0] != "model call" {
		t.Errorf("stopped %v", st)
	}
}

func TestCompactedRequestReplacesHistoryAndBlobsComeBack(t *testing.T) {
	w := newWriter(t)
	big := strings.Repeat("b", 10000)
	ref, err := w.log.PutBlob([]byte(big))
	if err != nil {
		t.Fatal(err)
	}
	w.request("main", 1, 0, sys(), map[string]any{"role": "user", "content_ref": ref})
	w.response("main", 1, llm.Message{Content: "thinking"})
	w.add(record.TypeObservation, "main", record.Observation{Kind: "no_tool_call", Text: "use tools"})
	// After a compaction the request carries the whole (shorter) history.
	w.request("main", 2, 0, sys(), llm.Message{Role: llm.RoleUser, Content: "summary"})
	w.response("main", 2, llm.Message{ToolCalls: []llm.ToolCall{{ID: "f", Name: "finish", Arguments: `{"summary":"all done"}`}}})
	w.add(record.TypeToolResult, "main", record.ToolResult{CallID: "f", Name: "finish", Output: "run finished"})
	a := w.agents()["main"]
	if a.Finished == nil || *a.Finished != "all done" || a.Turns != 2 {
		t.Fatalf("finished %v turns %d", a.Finished, a.Turns)
	}
	if len(a.History) != 4 || a.History[1].Content != "summary" {
		t.Fatalf("history %+v", a.History)
	}

	w2 := newWriter(t)
	ref2, _ := w2.log.PutBlob([]byte(big))
	w2.request("main", 1, 0, sys(), map[string]any{"role": "user", "content_ref": ref2})
	if got := w2.agents()["main"].History[1].Content; got != big {
		t.Fatalf("blob body not restored: %d bytes", len(got))
	}
}

func TestRequestBeyondKnownHistoryIsAnError(t *testing.T) {
	w := newWriter(t)
	w.request("main", 1, 5, task())
	c, _ := record.Read(w.dir)
	if _, err := Agents(w.dir, c.Events); err == nil {
		t.Fatal("a request starting past the known history was accepted")
	}
}

func TestAgentsAreSeparate(t *testing.T) {
	w := newWriter(t)
	w.request("lead", 1, 0, sys(), task())
	w.request("A1", 1, 0, sys(), llm.Message{Role: llm.RoleUser, Content: "sub task"})
	w.response("A1", 1, llm.Message{Content: "sub reply"})
	w.add(record.TypeObservation, "lead", record.Observation{Kind: "assignments", Text: "A1 reported"})
	as := w.agents()
	if !as["lead"].AwaitingModel || as["A1"].AwaitingModel {
		t.Fatalf("lead awaiting %v, A1 awaiting %v", as["lead"].AwaitingModel, as["A1"].AwaitingModel)
	}
	// The lead's notice arrived after its last request: it is in its history,
	// protected from compaction.
	last := as["lead"].History[len(as["lead"].History)-1]
	if !last.Protected || !strings.Contains(last.Content, "A1 reported") {
		t.Fatalf("lead's last message %+v", last)
	}
}

func TestRecordedEffectCompletesTheCallOfItsOwnAgentOnly(t *testing.T) {
	w := newWriter(t)
	w.request("lead", 1, 0, sys(), task())
	w.response("lead", 1, llm.Message{ToolCalls: []llm.ToolCall{{ID: "call_0_0", Name: "board_add", Arguments: `{}`}}})
	w.add("board", "lead", map[string]any{"op": "add", "id": "T1", "call_id": "call_0_0"})
	// A subagent's call with the same id is not completed by the lead's effect.
	w.request("A1", 1, 0, sys(), task())
	w.response("A1", 1, llm.Message{ToolCalls: []llm.ToolCall{{ID: "call_0_0", Name: "write_file", Arguments: `{}`}}})
	as := w.agents()
	lead, sub := as["lead"], as["A1"]
	if len(lead.Interrupted) != 0 || !strings.HasPrefix(lead.History[len(lead.History)-1].Content, "added T1") {
		t.Fatalf("lead: interrupted %v, last %q", lead.Interrupted, lead.History[len(lead.History)-1].Content)
	}
	if len(sub.Interrupted) != 1 {
		t.Fatalf("A1's call was taken as completed by the lead's effect: %+v", sub.History[len(sub.History)-1])
	}
}
