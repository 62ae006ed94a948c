package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/anthropic"
	"github.com/apodex/apodex/internal/llm/llmtest"
)

const anthropicHi = `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// A streamed Anthropic turn is the API's event sequence, each tool_use's
// input sent in pieces after an empty one, one block after the other.
func TestAnthropicStreamShape(t *testing.T) {
	srv := llmtest.NewAnthropic(t, func(int, llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Content: "two calls", Calls: []llm.ToolCall{{Name: "x", Arguments: `{"a":"123456"}`}, {Name: "y"}}}
	})
	status, body := post(t, srv.URL+"/v1/messages", anthropicHi)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var names []string
	var partial []string
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		name, data, _ := strings.Cut(ev, "\ndata: ")
		name = strings.TrimPrefix(name, "event: ")
		var d struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta struct {
				PartialJSON *string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil || d.Type != name {
			t.Fatalf("event %q: type %q, %v", ev, d.Type, err)
		}
		names = append(names, name)
		if d.Delta.PartialJSON != nil {
			partial = append(partial, *d.Delta.PartialJSON)
		}
	}
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("events\n%v\nwant\n%v", names, want)
	}
	if got := strings.Join(partial, "|"); got != `|{"a"|:"123|456"}|` {
		t.Errorf("input pieces %q", got)
	}
}

// The URL serves the client as its base URL, bare or ending in /v1.
func TestAnthropicBaseURL(t *testing.T) {
	srv := llmtest.NewAnthropic(t, llmtest.Script())
	for _, base := range []string{srv.URL, srv.URL + "/v1", srv.URL + "/"} {
		c := anthropic.New(anthropic.Config{BaseURL: base, Model: "m", APIKey: "k"})
		resp, err := c.Generate(context.Background(), request())
		if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "finish" {
			t.Errorf("base %s: %+v, %v", base, resp, err)
		}
	}
	r := srv.Requests()[0]
	if r.Header.Get("x-api-key") != "k" || r.MaxTokens <= 0 || r.Messages[0].Content != "hi" {
		t.Errorf("request %+v", r)
	}
}

func TestAnthropicErrorsAndOverrides(t *testing.T) {
	srv := llmtest.NewAnthropic(t, llmtest.Script(
		llmtest.Turn{Status: 429, RetryAfter: "7"},
		llmtest.Turn{Status: 529},
		llmtest.Turn{Status: 401},
		llmtest.Turn{Body: `{"type":"message","content":[],"stop_reason":null}`},
		llmtest.Turn{Calls: []llm.ToolCall{{Name: "bash", Arguments: `{"command": `}}},
		llmtest.Turn{Hang: true},
	))
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "m"})
	ctx := context.Background()
	var api *llm.APIError

	_, err := c.Generate(ctx, request())
	if !errors.As(err, &api) || api.StatusCode != 429 || api.RetryAfter != 7*time.Second || !strings.Contains(api.Message, "fake error") {
		t.Errorf("429 turn: %v", err)
	}
	_, err = c.Generate(ctx, request())
	if !errors.As(err, &api) || api.StatusCode != 529 || api.Message != "Overloaded" || !llm.IsRetryable(err) {
		t.Errorf("529 turn: %v", err)
	}
	_, err = c.Generate(ctx, request())
	if !errors.As(err, &api) || api.StatusCode != 401 || llm.IsRetryable(err) {
		t.Errorf("401 turn: %v", err)
	}
	if _, err = c.Generate(ctx, request()); !errors.Is(err, llm.ErrEmpty) {
		t.Errorf("body override: %v, want ErrEmpty", err)
	}
	// A malformed call cannot be an input object in a whole message: it
	// comes back as a JSON string, so the runtime still sees it is broken.
	resp, err := c.Generate(ctx, request())
	if err != nil || len(resp.Message.ToolCalls) != 1 || json.Valid([]byte(resp.Message.ToolCalls[0].Arguments)) &&
		!strings.HasPrefix(resp.Message.ToolCalls[0].Arguments, `"`) {
		t.Errorf("malformed call: %+v, %v", resp, err)
	}
	hctx, cancel := context.WithCancel(ctx)
	go func() {
		for len(srv.Requests()) < 6 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err = c.Generate(hctx, request()); !errors.Is(err, context.Canceled) {
		t.Errorf("hanging turn: %v, want context.Canceled", err)
	}
}

// Streamed, a malformed call arrives as sent.
func TestAnthropicStreamKeepsMalformedArguments(t *testing.T) {
	srv := llmtest.NewAnthropic(t, llmtest.Script(llmtest.Turn{Calls: []llm.ToolCall{{ID: "t1", Name: "bash", Arguments: `{"command": `}}}))
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "m", Stream: true})
	resp, err := c.Generate(context.Background(), request())
	if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Arguments != `{"command": ` || resp.FinishReason != "tool_calls" {
		t.Errorf("got %+v, %v", resp, err)
	}
}
