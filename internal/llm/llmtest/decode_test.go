package llmtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest/strict"
)

// What the Anthropic fake hands its policy: the neutral shape.
func TestDecodeAnthropic(t *testing.T) {
	body := `{"model":"m","max_tokens":1024,"system":"be brief",` +
		`"tools":[{"name":"read_file","description":"read","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
		`"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"a","name":"read_file","input":{"path":"a"}},{"type":"tool_use","id":"b","name":"read_file","input":{"path":"a"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"contents"},{"type":"tool_result","tool_use_id":"b","content":"contents"},{"type":"text","text":"go on"}]}]}`
	req, err := decodeAnthropic([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range req.Messages {
		s := m.Role + ":" + m.Content
		for _, c := range m.ToolCalls {
			s += fmt.Sprintf(" %s(%s)", c.ID, c.Arguments)
		}
		if m.ToolCallID != "" {
			s += " answers " + m.ToolCallID
		}
		got = append(got, s)
	}
	want := []string{"system:be brief", "user:hi", `assistant:reading a({"path":"a"}) b({"path":"a"})`,
		"tool:contents answers a", "tool:contents answers b", "user:go on"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if req.Model != "m" || req.MaxTokens != 1024 || len(req.Tools) != 1 || req.Tools[0].Name != "read_file" || len(req.Tools[0].Parameters) == 0 {
		t.Errorf("request %+v", req)
	}
}

// A body the strict check accepts is one the fake can decode for its
// policy (seeds: the strict package's cases, in testdata/fuzz).
func FuzzDecodeAnthropic(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if strict.CheckAnthropic(body) != nil {
			return
		}
		if _, err := decodeAnthropic(body); err != nil {
			t.Fatalf("accepted body does not decode: %v\n%s", err, body)
		}
	})
}

func FuzzDecodeOpenAI(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if strict.CheckOpenAI(body) != nil {
			return
		}
		if _, err := decodeOpenAI(body); err != nil {
			t.Fatalf("accepted body does not decode: %v\n%s", err, body)
		}
	})
}
