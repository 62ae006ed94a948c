package export

import (
	"encoding/json"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/trajectory"
	"github.com/apodex/apodex/internal/trajectory/atiftest"
)

// A reply's reasoning and cached tokens reach the ATIF step (reasoning_content,
// metrics.cached_tokens) and the hf chat line (reasoning_content).
func TestReasoningAndCacheExported(t *testing.T) {
	dir := t.TempDir()
	l, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Model: record.ModelSettings{Provider: "openai", Name: "m"}})
	req, _ := l.Append(record.TypeModelRequest, "main", map[string]any{"turn": 1, "from": 0, "messages": []llm.Message{{Role: llm.RoleSystem, Content: "sys"}, {Role: llm.RoleUser, Content: "task"}}})
	reply := llm.Message{Role: llm.RoleAssistant, Reasoning: "the file is small", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "finish", Arguments: `{"summary":"ok"}`}}}
	l.Append(record.TypeModelResponse, "main", record.ModelResponse{Turn: 1, Request: req, Message: mustJSON(t, reply),
		Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 9, TotalTokens: 109, CachedTokens: 64, Reported: true}, ResponseID: "chatcmpl-1"})
	l.Append(record.TypeToolResult, "main", record.ToolResult{Turn: 1, CallID: "c1", Name: "finish", Output: "finished"})
	l.Close()
	r, err := trajectory.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs := ToATIF(r, Context{}, "test", ATIFv17)
	raw, _ := json.Marshal(docs[0].ATIF)
	if errs := atiftest.Validate(raw); len(errs) > 0 {
		t.Fatal(errs)
	}
	st := docs[0].Steps[2]
	if st.ReasoningContent != "the file is small" || st.Metrics == nil || st.Metrics.CachedTokens != 64 || st.Metrics.PromptTokens != 100 || st.Timestamp == "" ||
		st.Observation == nil || st.Observation.Results[0].Content != "finished" || docs[0].FinalMetrics.TotalCachedTokens != 64 {
		t.Errorf("agent step %+v, final %+v", st, docs[0].FinalMetrics)
	}
	lines, _ := Chat(r, Context{}, ChatOptions{Flavor: FlavorHF})
	if m := lines[0].Messages[2]; m.ReasoningContent != "the file is small" || string(m.ToolCalls[0].Function.Arguments) != `{"summary":"ok"}` {
		t.Errorf("hf assistant message %+v", m)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
