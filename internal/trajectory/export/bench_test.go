package export

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/trajectory"
)

// A 500-step run: load it from the record and write its chat line and
// ATIF trajectory.
func BenchmarkExport500Steps(b *testing.B) {
	dir := b.TempDir()
	l, _ := record.Create(dir, nil)
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r"})
	l.Append(record.TypeModelRequest, "main", map[string]any{"turn": 1, "from": 0, "messages": []map[string]any{{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}}})
	for i := 1; i <= 500; i++ {
		id := fmt.Sprintf("c%d", i)
		msg := map[string]any{"role": "assistant", "content": "step", "tool_calls": []map[string]any{{"id": id, "name": "bash", "arguments": `{"command":"echo hi"}`}}}
		l.Append(record.TypeModelResponse, "main", map[string]any{"turn": i, "message": msg})
		l.Append(record.TypeToolCall, "main", record.ToolCall{Turn: i, CallID: id, Name: "bash", Arguments: `{"command":"echo hi"}`})
		l.Append(record.TypeToolResult, "main", record.ToolResult{Turn: i, CallID: id, Name: "bash", Output: "exit code: 0\nhi"})
		if i < 500 {
			l.Append(record.TypeModelRequest, "main", map[string]any{"turn": i + 1, "from": 2*i + 1, "messages": []map[string]any{{"role": "tool", "content": "exit code: 0\nhi", "tool_call_id": id, "name": "bash"}}})
		}
	}
	l.Close()
	b.ReportAllocs()
	for b.Loop() {
		r, err := trajectory.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		lines, _ := Chat(r, Context{}, ChatOptions{})
		if len(lines) != 1 || len(lines[0].Messages) < 1000 {
			b.Fatalf("%d lines, %d messages", len(lines), len(lines[0].Messages))
		}
		json.NewEncoder(io.Discard).Encode(lines)
		json.NewEncoder(io.Discard).Encode(ToATIF(r, Context{}, "dev", ""))
	}
}
