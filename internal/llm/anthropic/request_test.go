package anthropic

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
)

func TestRequestBody(t *testing.T) {
	temp := 0.5
	full := &llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are terse."},
			{Role: llm.RoleUser, Content: "Read a.go and b.go."},
			{Role: llm.RoleSystem, Content: "Never guess."},
			{Role: llm.RoleAssistant, Content: "Reading both.", ToolCalls: []llm.ToolCall{
				{ID: "t1", Name: "read_file", Arguments: `{"path": "a.go"}`},
				{ID: "t2", Name: "read_file", Arguments: `{"path":"b.go"}`},
			}},
			{Role: llm.RoleTool, ToolCallID: "t1", Name: "read_file", Content: "package a"},
			{Role: llm.RoleTool, ToolCallID: "t2", Name: "read_file", Content: "no such file", IsError: true},
			{Role: llm.RoleUser, Content: "Also mind x<y."},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t3", Name: "now", Arguments: ""}}},
			{Role: llm.RoleTool, ToolCallID: "t3", Content: "noon"},
		},
		Tools: []llm.ToolSpec{
			{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "now", Description: "The time."},
		},
		Temperature: &temp,
	}
	tests := []struct {
		name string
		cfg  Config
		req  *llm.Request
		want string
	}{
		{name: "full conversation", cfg: Config{Model: "claude-cfg"}, req: full, want: `{
			"model": "claude-cfg", "max_tokens": 4096, "temperature": 0.5,
			"system": "You are terse.\n\nNever guess.",
			"messages": [
				{"role": "user", "content": [{"type": "text", "text": "Read a.go and b.go."}]},
				{"role": "assistant", "content": [
					{"type": "text", "text": "Reading both."},
					{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.go"}},
					{"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b.go"}}]},
				{"role": "user", "content": [
					{"type": "tool_result", "tool_use_id": "t1", "content": "package a", "is_error": false},
					{"type": "tool_result", "tool_use_id": "t2", "content": "no such file", "is_error": true},
					{"type": "text", "text": "Also mind x<y."}]},
				{"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "now", "input": {}}]},
				{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "noon", "is_error": false}]}
			],
			"tools": [
				{"name": "read_file", "description": "Read a file.", "input_schema": {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
				{"name": "now", "description": "The time.", "input_schema": {"type": "object"}}
			]}`},
		{name: "request model and max tokens win", cfg: Config{Model: "claude-cfg", MaxOutputTokens: 100},
			req:  &llm.Request{Model: "claude-req", MaxOutputTokens: 7, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}},
			want: `{"model": "claude-req", "max_tokens": 7, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}`},
		{name: "config max tokens", cfg: Config{Model: "claude-cfg", MaxOutputTokens: 100},
			req:  &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}},
			want: `{"model": "claude-cfg", "max_tokens": 100, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}`},
		{name: "results of one turn first, then text; consecutive users merged", cfg: Config{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{
				{Role: llm.RoleUser, Content: "start"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "x"}, {ID: "b", Name: "x"}}},
				{Role: llm.RoleTool, ToolCallID: "a", Content: "1"},
				{Role: llm.RoleTool, ToolCallID: "b", Content: "2"},
				{Role: llm.RoleUser, Content: " "},
				{Role: llm.RoleUser, Content: "go on"},
				{Role: llm.RoleAssistant}, // empty: dropped
				{Role: llm.RoleUser, Content: "please"},
			}, Tools: []llm.ToolSpec{{Name: "x"}}},
			want: `{"model": "m", "max_tokens": 4096, "messages": [
				{"role": "user", "content": [{"type": "text", "text": "start"}]},
				{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "x", "input": {}}, {"type": "tool_use", "id": "b", "name": "x", "input": {}}]},
				{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1", "is_error": false},
					{"type": "tool_result", "tool_use_id": "b", "content": "2", "is_error": false},
					{"type": "text", "text": "go on"}, {"type": "text", "text": "please"}]}],
				"tools": [{"name": "x", "input_schema": {"type": "object"}}]}`},
		{name: "a result with no call becomes text that says what it is", cfg: Config{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{
				{Role: llm.RoleUser, Content: "summary"},
				{Role: llm.RoleTool, ToolCallID: "w1", Name: "wait", Content: "A1 reported"},
			}},
			want: `{"model": "m", "max_tokens": 4096, "messages": [
				{"role": "user", "content": [{"type": "text", "text": "summary"},
					{"type": "text", "text": "[runtime observation] Result of an earlier wait call (w1), carried over:\nA1 reported"}]}]}`},
		{name: "an assistant first gets a user message before it", cfg: Config{Model: "m"},
			req: &llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Content: "hello"}, {Role: llm.RoleUser, Content: "hi"}}},
			want: `{"model": "m", "max_tokens": 4096, "messages": [
				{"role": "user", "content": [{"type": "text", "text": "(the conversation so far follows)"}]},
				{"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
				{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}`},
		{name: "no messages is an empty array", cfg: Config{Model: "m"}, req: &llm.Request{},
			want: `{"model": "m", "max_tokens": 4096, "messages": []}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// An empty conversation is sent as an empty array (the API refuses
			// it, which is the caller's to see): the one odd request here.
			srv, rec := fakeServer(t, reply{body: `{"content":[],"stop_reason":"end_turn"}`, lenient: len(tt.req.Messages) == 0})
			tt.cfg.BaseURL = srv.URL + "/"
			tt.cfg.APIKey = testKey
			if _, err := New(tt.cfg).Generate(t.Context(), tt.req); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			header, body, path := rec.last(t)
			if path != "/v1/messages" {
				t.Errorf("path = %q", path)
			}
			for k, v := range map[string]string{"x-api-key": testKey, "anthropic-version": "2023-06-01", "content-type": "application/json"} {
				if got := header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			jsonEqual(t, body, tt.want)
		})
	}
}

func TestStreamRequest(t *testing.T) {
	srv, rec := fakeServer(t, reply{body: textStream})
	c := New(Config{BaseURL: srv.URL + "/v1", Model: "m", Stream: true})
	if _, err := c.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	header, body, path := rec.last(t)
	if path != "/v1/messages" || header.Get("accept") != "text/event-stream" || header.Get("x-api-key") != "" {
		t.Errorf("path %q, accept %q, x-api-key %q", path, header.Get("accept"), header.Get("x-api-key"))
	}
	var w struct{ Stream bool }
	if json.Unmarshal(body, &w) != nil || !w.Stream {
		t.Errorf("body does not ask for a stream: %s", body)
	}
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  *llm.Request
		want string
	}{
		{"nil request", nil, "nil request"},
		{"no model", &llm.Request{}, "no model"},
		{"bad schema", &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "x", Parameters: json.RawMessage("{")}}}, `tool "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{BaseURL: "http://127.0.0.1:1"}).Generate(t.Context(), tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// A malformed argument string, as a cut stream leaves it, survives the trip
// back to the API inside {"_raw": ...}.
func TestMalformedArgumentsRoundTrip(t *testing.T) {
	cut := ev("message_start", msgStart) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"write","input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	srv, rec := fakeServer(t, reply{body: cut})
	c := New(Config{BaseURL: srv.URL, Model: "m", Stream: true})
	resp, err := c.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "write"}}})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := resp.Message.ToolCalls[0].Arguments; got != `{"path": "a` || resp.FinishReason != "length" {
		t.Fatalf("Arguments = %q, finish %q; want the text as sent", got, resp.FinishReason)
	}
	_, err = c.Generate(t.Context(), &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "write"},
		resp.Message,
		{Role: llm.RoleTool, ToolCallID: "t1", Content: "arguments are not valid JSON", IsError: true},
	}, Tools: []llm.ToolSpec{{Name: "write", Description: "Write a file."}}})
	if err != nil {
		t.Fatalf("second Generate: %v", err)
	}
	_, body, _ := rec.last(t)
	var w struct {
		Messages []struct {
			Content []struct {
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, w.Messages[1].Content[0].Input, `{"_raw": "{\"path\": \"a"}`)
}

func TestToolInput(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `{}`},
		{"  ", `{}`},
		{`{"a": [1, 2]}`, `{"a":[1,2]}`},
		{`{"a":`, `{"_raw":"{\"a\":"}`},
		{`[1]`, `{"_raw":"[1]"}`},
		{`"s"`, `{"_raw":"\"s\""}`},
		{`null`, `{"_raw":"null"}`},
		{`{} {}`, `{"_raw":"{} {}"}`},
	}
	for _, tt := range tests {
		if got := string(toolInput(tt.in)); got != tt.want {
			t.Errorf("toolInput(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzToolInput: whatever the arguments, the input is a JSON object, and
// either the arguments themselves or a {"_raw"} holding them exactly.
func FuzzToolInput(f *testing.F) {
	for _, s := range []string{"", `{"a":1}`, `{"a":`, `[]`, "\xff", `{"<":"&"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		in := toolInput(args)
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(in, &obj); err != nil || obj == nil {
			t.Fatalf("toolInput(%q) = %s, not a JSON object", args, in)
		}
		raw, wrapped := obj["_raw"]
		if !wrapped || strings.HasPrefix(strings.TrimSpace(args), "{") && json.Valid([]byte(args)) {
			return
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("_raw is not a string: %s", raw)
		}
		if utf8.ValidString(args) && s != args {
			t.Fatalf("_raw = %q, want %q", s, args)
		}
	})
}

// With extended thinking on, Anthropic requires an assistant turn's
// thinking blocks back, signature included, before its tool_use: the
// blocks the reply carried go back first, an unsigned one does not.
func TestThinkingSentBack(t *testing.T) {
	_, msgs := mapMessages([]llm.Message{
		{Role: llm.RoleUser, Content: "go"},
		{Role: llm.RoleAssistant, Content: "Reading.", Reasoning: "hmm", Thinking: []llm.Thinking{
			{Type: "thinking", Text: "hmm", Signature: "sig"}, {Type: "redacted_thinking", Data: "ENC"}, {Type: "thinking", Text: "unsigned"}},
			ToolCalls: []llm.ToolCall{{ID: "t1", Name: "read_file", Arguments: `{}`}}},
		{Role: llm.RoleTool, ToolCallID: "t1", Content: "x"},
	})
	raw, err := json.Marshal(msgs[1])
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, raw, `{"role":"assistant","content":[
		{"type":"thinking","thinking":"hmm","signature":"sig"},
		{"type":"redacted_thinking","data":"ENC"},
		{"type":"text","text":"Reading."},
		{"type":"tool_use","id":"t1","name":"read_file","input":{}}]}`)
}
