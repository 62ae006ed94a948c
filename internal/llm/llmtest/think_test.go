package llmtest_test

import (
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

// A thinking block sent back before its tool_use (extended thinking) is a
// valid assistant block.
func TestThinkingBlockAccepted(t *testing.T) {
	body := `{"model":"m","max_tokens":100,"tools":[{"name":"x","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
	if v := strict.CheckAnthropic([]byte(body)); v != nil {
		t.Fatal(v)
	}
}
