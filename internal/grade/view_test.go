package grade

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// fixture writes a small run: an agent turn with private reasoning, a
// tool call, the verifier's work, the delivery and the end.
func fixture(t *testing.T) (string, []record.Event) {
	t.Helper()
	dir := t.TempDir()
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	add := func(typ, agent string, p any) {
		if _, err := l.Append(typ, agent, p); err != nil {
			t.Fatal(err)
		}
	}
	add(record.TypeRunStarted, "", record.RunStarted{RunID: "r1", Objective: "sum the column"})
	add(record.TypeModelResponse, "main", map[string]any{"turn": 1, "message": map[string]any{"role": "assistant", "content": "I will read it.", "reasoning_content": "SECRET-THOUGHT"}})
	add(record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "verify", Arguments: `{"claim":"x"}`})
	add(record.TypeModelResponse, "verifier", record.ModelResponse{Purpose: record.PurposeVerify, Message: json.RawMessage(`{"role":"assistant","content":"VERIFIER-SAYS"}`)})
	add(record.TypeToolResult, "main", record.ToolResult{Turn: 1, CallID: "c1", Name: "verify", Output: "verdict: VERDICT-TEXT"})
	add(record.TypeVerification, "", map[string]any{"name": "check", "passed": true, "stdout": "VERIFICATION-OUT"})
	add(record.TypeDelivery, "", map[string]any{"ok": true, "entries": []map[string]any{{"path": "/outputs/DELIVERED-PATH", "status": "delivered"}}})
	add(record.TypeRunFinished, "", record.RunFinished{Termination: "TERMINATION-X", Status: "completed", Summary: "SUMMARY-END"})
	l.Close()
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c.Events
}

func TestViewWithholds(t *testing.T) {
	_, evs := fixture(t)
	v := NewView(evs)
	for _, secret := range []string{"SECRET-THOUGHT", "VERIFIER-SAYS", "VERDICT-TEXT", "VERIFICATION-OUT", "DELIVERED-PATH", "TERMINATION-X", "SUMMARY-END"} {
		if strings.Contains(v.Text, secret) {
			t.Errorf("the visible log contains %s:\n%s", secret, v.Text)
		}
	}
	for _, want := range []string{"[seq 2]", "I will read it.", "[seq 3]", "verify"} {
		if !strings.Contains(v.Text, want) {
			t.Errorf("the visible log lacks %q:\n%s", want, v.Text)
		}
	}
	for seq, visible := range map[int64]bool{2: true, 3: true, 4: false, 6: false, 7: false, 8: false} {
		if v.Visible[seq] != visible {
			t.Errorf("seq %d visible %v, want %v", seq, v.Visible[seq], visible)
		}
	}
}

// A stage that never answers validly fails with ErrStage after MaxAttempts
// calls, each told what was wrong.
func TestStageAskedAgainThenFails(t *testing.T) {
	dir, _ := fixture(t)
	var reqs []*llm.Request
	bad := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		reqs = append(reqs, req)
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "x", Name: "record_windows", Arguments: `{"windows":[{"item":"decomposition.1","seqs":[7]}]}`}}}}, nil
	})
	_, err := Run(context.Background(), dir, Models{Mapper: bad, Judge: bad, Reviewer: bad, Arbiter: bad})
	if err == nil || !strings.Contains(err.Error(), "grade: the grader did not give a valid answer") {
		t.Fatalf("err %v", err)
	}
	if len(reqs) != MaxAttempts {
		t.Fatalf("%d calls, want %d", len(reqs), MaxAttempts)
	}
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.Role != llm.RoleTool || !strings.Contains(m.Content, "seq 7 is not a line of the visible log") {
		t.Errorf("the retry does not say why: %+v", m)
	}
}
