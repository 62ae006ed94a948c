package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
)

var tools = []llm.ToolSpec{{Name: "read_file", Description: "read", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}

func request() *llm.Request {
	return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Tools: tools}
}

// The fake and the real client agree on both wire formats: parallel calls
// split into pieces come back whole, in order, with content and usage.
func TestTurnRoundTripsThroughTheClient(t *testing.T) {
	usage := llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10, Reported: true}
	turn := llmtest.Turn{
		Content: "two at once — ünïcode",
		Calls: []llm.ToolCall{
			{ID: "a", Name: "read_file", Arguments: `{"path":"/inputs/one.txt"}`},
			{Name: "bash", Arguments: `{"command":"echo ünï"}`},
			{ID: "c", Name: "write_file", Arguments: `{"path": `},
		},
		Usage: &usage,
	}
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "whole"}[stream], func(t *testing.T) {
			srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn { return turn })
			c := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", Stream: stream, APIKey: "k"})
			resp, err := c.Generate(context.Background(), request())
			if err != nil {
				t.Fatal(err)
			}
			want := []llm.ToolCall{turn.Calls[0], {ID: "call_0_1", Name: "bash", Arguments: turn.Calls[1].Arguments}, turn.Calls[2]}
			if !reflect.DeepEqual(resp.Message.ToolCalls, want) {
				t.Errorf("calls = %+v, want %+v", resp.Message.ToolCalls, want)
			}
			if resp.Message.Content != turn.Content || resp.Usage != usage || resp.FinishReason != "tool_calls" {
				t.Errorf("content %q usage %+v finish %q", resp.Message.Content, resp.Usage, resp.FinishReason)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if r.Stream != stream || r.IncludeUsage != stream || r.Model != "m" || r.Header.Get("Authorization") != "Bearer k" {
				t.Errorf("request stream %v include_usage %v model %q auth %q", r.Stream, r.IncludeUsage, r.Model, r.Header.Get("Authorization"))
			}
			if len(r.Messages) != 1 || r.Messages[0].Content != "hi" || len(r.Tools) != 1 || r.Tools[0].Name != "read_file" || r.Tools[0].Type != "function" {
				t.Errorf("decoded request %+v", r)
			}
		})
	}
}

// A streamed turn really is split: several argument pieces per call, the
// calls interleaved, and usage alone in a last chunk with empty choices.
func TestStreamShape(t *testing.T) {
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Calls: []llm.ToolCall{{Name: "x", Arguments: `{"a":"123456"}`}, {Name: "y", Arguments: `{"b":"789012"}`}}}
	})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`
	resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "data: ") {
			lines = append(lines, strings.TrimPrefix(l, "data: "))
		}
	}
	var argIdx []int // the call index of each chunk that only carries arguments
	for _, l := range lines[:len(lines)-1] {
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int     `json:"index"`
						ID       *string `json:"id"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(l), &ch); err != nil {
			t.Fatalf("chunk %s: %v", l, err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.ID == nil {
					argIdx = append(argIdx, tc.Index)
				}
			}
		}
	}
	if want := []int{0, 1, 0, 1, 0, 1}; !reflect.DeepEqual(argIdx, want) {
		t.Errorf("argument chunks by call index = %v, want %v", argIdx, want)
	}
	n := len(lines)
	if n < 3 || lines[n-1] != "[DONE]" || !strings.Contains(lines[n-2], `"choices":[]`) || !strings.Contains(lines[n-2], `"usage":{`) {
		t.Errorf("stream does not end with a usage chunk and [DONE]:\n%s", strings.Join(lines, "\n"))
	}
}

func TestErrorsAndOverrides(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		llmtest.Turn{Status: 429, RetryAfter: "7"},
		llmtest.Turn{Status: 401},
		llmtest.Turn{Body: `{"choices":[]}`},
		llmtest.Turn{Hang: true},
	))
	c := openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	ctx := context.Background()

	_, err := c.Generate(ctx, request())
	var api *llm.APIError
	if !errors.As(err, &api) || api.StatusCode != 429 || api.RetryAfter != 7*time.Second {
		t.Errorf("429 turn: %v", err)
	}
	_, err = c.Generate(ctx, request())
	if !errors.As(err, &api) || api.StatusCode != 401 || llm.IsRetryable(err) {
		t.Errorf("401 turn: %v", err)
	}
	if _, err = c.Generate(ctx, request()); !errors.Is(err, llm.ErrEmpty) {
		t.Errorf("body override: %v, want ErrEmpty", err)
	}
	hctx, cancel := context.WithCancel(ctx)
	go func() {
		for len(srv.Requests()) < 4 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err = c.Generate(hctx, request()); !errors.Is(err, context.Canceled) {
		t.Errorf("hanging turn: %v, want context.Canceled", err)
	}
	// Past the script's end: finish.
	resp, err := c.Generate(ctx, request())
	if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "finish" {
		t.Errorf("past the end: %+v, %v", resp, err)
	}
	if got := len(srv.Requests()); got != 5 {
		t.Errorf("%d requests recorded, want 5", got)
	}
}

// The requests record what the client sent back: tool calls and tool results.
func TestRequestsDecodeHistory(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script())
	c := openai.New(openai.Config{BaseURL: srv.URL, Model: "m", Stream: true})
	req := request()
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_file", Content: "contents"})
	if _, err := c.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	m := srv.Requests()[0].Messages
	if len(m) != 3 || m[1].Role != "assistant" || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0].Arguments != `{"path":"a"}` ||
		m[2].Role != "tool" || m[2].ToolCallID != "c1" || m[2].Content != "contents" {
		t.Errorf("decoded messages %+v", m)
	}
}
