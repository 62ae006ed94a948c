package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
)

func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }

func assistant(calls ...llm.ToolCall) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}
}

func toolMsg(id, content string) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: content}
}

// echoTurn is a Policy that reports which turn it was asked for.
func echoTurn(turn int, req *llm.Request) (*llm.Response, error) {
	return Calls(Call("turn", map[string]int{"n": turn}), Call("other", nil)), nil
}

func TestGenerateTurnAndIDs(t *testing.T) {
	tests := []struct {
		name     string
		messages []llm.Message
		wantTurn string
		wantIDs  []string
	}{
		{
			name:     "first turn",
			messages: []llm.Message{user("go")},
			wantTurn: `{"n":0}`,
			wantIDs:  []string{"call_0_0", "call_0_1"},
		},
		{
			name: "after two assistant messages",
			messages: []llm.Message{
				user("go"), assistant(), toolMsg("a", "x"), user("more"), assistant(), toolMsg("b", "y"),
			},
			wantTurn: `{"n":2}`,
			wantIDs:  []string{"call_2_0", "call_2_1"},
		},
	}
	m := New(echoTurn)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &llm.Request{Messages: tt.messages}
			resp, err := m.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Message.ToolCalls[0].Arguments; got != tt.wantTurn {
				t.Errorf("turn args = %s, want %s", got, tt.wantTurn)
			}
			var ids []string
			for _, c := range resp.Message.ToolCalls {
				ids = append(ids, c.ID)
			}
			if !reflect.DeepEqual(ids, tt.wantIDs) {
				t.Errorf("ids = %v, want %v", ids, tt.wantIDs)
			}
			if resp.Message.Role != llm.RoleAssistant || resp.FinishReason != "tool_calls" || resp.Model != "scripted" {
				t.Errorf("role/finish/model = %q/%q/%q", resp.Message.Role, resp.FinishReason, resp.Model)
			}
			again, err := m.Generate(context.Background(), req)
			if err != nil || !reflect.DeepEqual(again, resp) {
				t.Errorf("second Generate = %+v, %v; want the same response (stateless)", again, err)
			}
		})
	}
}

func TestGenerateKeepsPolicyFields(t *testing.T) {
	shared := &llm.Response{
		Message:      llm.Message{ToolCalls: []llm.ToolCall{{ID: "mine", Name: "a"}, {Name: "b"}}},
		Usage:        llm.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3},
		FinishReason: "length",
		Model:        "fake-1",
	}
	m := New(func(int, *llm.Request) (*llm.Response, error) { return shared, nil })
	resp, err := m.Generate(context.Background(), &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.ToolCalls[0].ID != "mine" || resp.Message.ToolCalls[1].ID != "call_0_1" {
		t.Errorf("ids = %+v", resp.Message.ToolCalls)
	}
	if resp.Usage != shared.Usage || resp.FinishReason != "length" || resp.Model != "fake-1" {
		t.Errorf("policy fields overwritten: %+v", resp)
	}
	if shared.Message.ToolCalls[1].ID != "" {
		t.Errorf("Generate mutated the policy's response")
	}
}

func TestGenerateUsageEstimate(t *testing.T) {
	req := &llm.Request{
		Messages: []llm.Message{
			user("12345678"), // 8
			assistant(llm.ToolCall{Name: "ab", Arguments: "{}"}), // 4
			toolMsg("x", "héllo"),                                // 5 runes
		},
		Tools: []llm.ToolSpec{{Name: "abc", Description: "d", Parameters: json.RawMessage(`{}`)}}, // 6
	}
	// prompt chars 23 -> 5; reply "hello world!" 12 -> 3
	m := New(func(int, *llm.Request) (*llm.Response, error) { return Text("hello world!"), nil })
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8, Reported: true}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.FinishReason != "stop" {
		t.Errorf("finish = %q, want stop", resp.FinishReason)
	}
}

func TestGenerateErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		policy Policy
		ctx    func() context.Context
		want   error
	}{
		{
			name:   "policy error passed through",
			policy: func(int, *llm.Request) (*llm.Response, error) { return nil, boom },
			want:   boom,
		},
		{
			name:   "nil response",
			policy: func(int, *llm.Request) (*llm.Response, error) { return nil, nil },
		},
		{
			name:   "context done",
			policy: echoTurn,
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			want: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			_, err := New(tt.policy).Generate(ctx, &llm.Request{})
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestGenerateConcurrent(t *testing.T) {
	m := New(echoTurn)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			msgs := []llm.Message{user("go")}
			for range i {
				msgs = append(msgs, assistant())
			}
			if _, err := m.Generate(context.Background(), &llm.Request{Messages: msgs}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestCallAndText(t *testing.T) {
	tests := []struct {
		name string
		args any
		want string
	}{
		{"map", map[string]any{"path": "/inputs", "n": 2}, `{"n":2,"path":"/inputs"}`},
		{"struct", struct {
			Path string `json:"path"`
		}{"/a"}, `{"path":"/a"}`},
		{"nil", nil, `null`},
		{"raw malformed", json.RawMessage(`{"path": `), `{"path": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Call("f", tt.args)
			if c.Name != "f" || c.Arguments != tt.want || c.ID != "" {
				t.Errorf("Call = %+v, want args %s", c, tt.want)
			}
		})
	}
	t.Run("unmarshallable panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("Call(func) did not panic")
			}
		}()
		Call("f", func() {})
	})
	if r := Text("hi"); r.Message.Role != llm.RoleAssistant || r.Message.Content != "hi" || len(r.Message.ToolCalls) != 0 {
		t.Errorf("Text = %+v", r)
	}
}

func TestLastObservation(t *testing.T) {
	tests := []struct {
		name     string
		messages []llm.Message
		want     string
	}{
		{"empty", nil, ""},
		{"no assistant yet", []llm.Message{user("hi")}, ""},
		{"assistant last", []llm.Message{user("hi"), assistant()}, ""},
		{
			"trailing tool messages joined",
			[]llm.Message{user("hi"), assistant(), toolMsg("1", "a=1"), toolMsg("2", "b=2")},
			"a=1\nb=2",
		},
		{
			"only after the last assistant, skipping user messages",
			[]llm.Message{assistant(), toolMsg("1", "old"), assistant(), toolMsg("2", "new"), user("note")},
			"new",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LastObservation(&llm.Request{Messages: tt.messages}); got != tt.want {
				t.Errorf("LastObservation = %q, want %q", got, tt.want)
			}
		})
	}
	if LastObservation(nil) != "" {
		t.Error("LastObservation(nil) not empty")
	}
}
