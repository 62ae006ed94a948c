package llmtest_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/anthropic"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
)

// backend is a fake API and the real client for it.
type backend struct {
	name   string
	start  func(testing.TB, func(int, llmtest.Request) llmtest.Turn) *llmtest.Server
	client func(url string, stream bool) llm.Model
}

var backends = []backend{
	{"openai", llmtest.NewOpenAI, func(url string, stream bool) llm.Model {
		return openai.New(openai.Config{BaseURL: url, Model: "m", Stream: stream})
	}},
	{"anthropic", llmtest.NewAnthropic, func(url string, stream bool) llm.Model {
		return anthropic.New(anthropic.Config{BaseURL: url, Model: "m", Stream: stream})
	}},
}

// A multi-turn tool conversation goes through each real client and its
// strict fake, streamed and not: calls (with ids the fake made up) come
// back whole, their answers go back as a valid history, and both fakes
// decode that history to the same neutral messages.
func TestToolConversationRoundTrips(t *testing.T) {
	usage := llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10, Reported: true}
	turns := []llmtest.Turn{
		{Content: "reading both", Calls: []llm.ToolCall{
			{Name: "read_file", Arguments: `{"path":"/inputs/one.txt"}`},
			{Name: "read_file", Arguments: `{"path":"/inputs/ünï.txt"}`},
		}, Usage: &usage},
		{Calls: []llm.ToolCall{{ID: "given_2", Name: "bash", Arguments: `{"command":"wc -l"}`}}, Usage: &usage},
		{Content: "all done", Usage: &usage},
	}
	histories := map[string][]string{}
	for _, b := range backends {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s/stream=%v", b.name, stream)
			t.Run(name, func(t *testing.T) {
				srv := b.start(t, llmtest.Script(turns...))
				c := b.client(srv.URL, stream)
				req := &llm.Request{Tools: tools, Messages: []llm.Message{
					{Role: llm.RoleSystem, Content: "be brief"},
					{Role: llm.RoleUser, Content: "count the lines"},
				}}
				for k := range turns {
					resp, err := c.Generate(context.Background(), req)
					if err != nil {
						t.Fatalf("turn %d: %v", k, err)
					}
					if resp.Message.Content != turns[k].Content || resp.Usage != usage {
						t.Errorf("turn %d: content %q usage %+v", k, resp.Message.Content, resp.Usage)
					}
					if len(resp.Message.ToolCalls) != len(turns[k].Calls) {
						t.Fatalf("turn %d: calls %+v", k, resp.Message.ToolCalls)
					}
					for i, call := range resp.Message.ToolCalls {
						if call.ID == "" || call.Name != turns[k].Calls[i].Name || call.Arguments != turns[k].Calls[i].Arguments {
							t.Errorf("turn %d call %d = %+v, want %+v", k, i, call, turns[k].Calls[i])
						}
					}
					req.Messages = append(req.Messages, resp.Message)
					for _, call := range resp.Message.ToolCalls {
						req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Name, Content: "out of " + call.ID})
					}
					if k == 0 {
						req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: "keep going"})
					}
				}
				reqs := srv.Requests()
				if len(reqs) != len(turns) || len(srv.Violations()) != 0 {
					t.Fatalf("%d requests, violations %v", len(reqs), srv.Violations())
				}
				last := reqs[len(reqs)-1]
				if last.Model != "m" || last.Stream != stream || len(last.Tools) != 1 || last.Tools[0].Name != "read_file" {
					t.Errorf("last request %+v", last)
				}
				histories[name] = summary(last.Messages)
			})
		}
	}
	want := histories["openai/stream=false"]
	for name, got := range histories {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s decodes the history as\n%s\nopenai as\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// summary is one line per message, with the call ids renamed in order of
// appearance (each fake makes up its own).
func summary(msgs []llmtest.Message) []string {
	ids := map[string]string{}
	id := func(s string) string {
		if ids[s] == "" {
			ids[s] = fmt.Sprintf("id%d", len(ids))
		}
		return ids[s]
	}
	var out []string
	for _, m := range msgs {
		s := m.Role + " " + m.Content
		for _, c := range m.ToolCalls {
			s += fmt.Sprintf(" call %s %s %s", id(c.ID), c.Name, c.Arguments)
		}
		if m.ToolCallID != "" {
			s = fmt.Sprintf("%s answers %s", m.Role, id(m.ToolCallID))
		}
		out = append(out, s)
	}
	return out
}
