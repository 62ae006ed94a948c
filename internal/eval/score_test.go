package eval

import (
	"math"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

func TestScoreRunFromTheRecord(t *testing.T) {
	dir := t.TempDir()
	log, err := record.Create(dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ, agent string, p any) {
		t.Helper()
		if _, err := log.Append(typ, agent, p); err != nil {
			t.Fatal(err)
		}
	}
	call := func(id, name, args string, isErr bool, out string) {
		ev(record.TypeToolCall, "main", record.ToolCall{CallID: id, Name: name, Arguments: args})
		ev(record.TypeToolResult, "main", record.ToolResult{CallID: id, Name: name, IsError: isErr, Output: out})
	}
	ev(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Inputs: []record.FileEntry{{Path: "/inputs/data.csv"}}})
	ev(record.TypeContract, "", map[string]any{"contract": map[string]any{"deliverables": []any{
		map[string]any{"path": "/outputs/a.txt"}, map[string]any{"path": "/outputs/b.txt"}}}})
	call("1", "read_file", `{"path":"/inputs/corpus/doc-01.md"}`, false, "# doc")
	call("2", "bash", `{"command":"awk x"}`, true, "syntax error")
	call("3", "bash", `{"command":"awk x"}`, true, "syntax error") // the same call again: no recovery
	call("4", "bash", `{"command":"awk '{print}' /inputs/data.csv"}`, false, "1")
	call("5", "write_file", `{"path":"/outputs/a.txt","content":"see doc-01.md, doc-02.md and /inputs/data.csv"}`, false, "wrote")
	ev(record.TypeFileDelta, "main", record.FileDelta{CallID: "5", Path: "/outputs/a.txt", After: "sha256:x", Content: "see doc-01.md, doc-02.md and /inputs/data.csv"})
	ev(record.TypeDelivery, "", map[string]any{"entries": []any{
		map[string]any{"path": "/outputs/a.txt", "status": "delivered"}, map[string]any{"path": "/outputs/b.txt", "status": "failed"}}})
	ev(record.TypeVerification, "", map[string]any{"passed": true})
	ev(record.TypeRunFinished, "", record.RunFinished{Status: "completed", ToolCalls: 5, Usage: llm.Usage{TotalTokens: 900}, DurationMS: 1500})
	log.Close()

	s, err := scoreRun(dir, []bool{true, false})
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Correct != 1 || s.Tokens != 900 || s.ToolCalls != 5 || s.WallS != 1.5 {
		t.Errorf("correct %v tokens %d calls %d wall %v", s.Correct, s.Tokens, s.ToolCalls, s.WallS)
	}
	near("completeness", s.Completeness, 0.5)
	// a.txt written by a call (1), doc-01 read (1), doc-02 never seen (0),
	// /inputs/data.csv an input (1): 3 of 4.
	near("provenance", s.Provenance, 0.75)
	// Two errors: the first repeated verbatim, the second followed by a
	// changed call that worked.
	near("recovery", s.Recovery, 0.5)
	near("intervention", s.Intervention, 0.5)
}
