package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/anthropic"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/llmtest/strict"
	"github.com/apodex/apodex/internal/llm/openai"
)

// recorder is a testing.TB that keeps what Errorf reports instead of
// failing the test; everything else goes to the real test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// fake is one of the two fake APIs with a broken and a valid body for it.
type fake struct {
	name    string
	start   func(testing.TB, func(int, llmtest.Request) llmtest.Turn) *llmtest.Server
	path    string // appended to the server's URL
	broken  string // a tool answer with no call before it, at messages[2]
	valid   string
	wantBad string // the error body the real API answers to broken
}

var fakes = []fake{
	{
		name: "openai", start: llmtest.NewOpenAI, path: "/chat/completions",
		broken: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
		valid:  `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		wantBad: `{"error":{"message":"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",` +
			`"type":"invalid_request_error","param":"messages.[2].role","code":null}}`,
	},
	{
		name: "anthropic", start: llmtest.NewAnthropic, path: "/v1/messages",
		broken: `{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"x"}]}]}`,
		valid: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		wantBad: "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.2: `tool_result` block(s) " +
			"provided when previous message does not have any `tool_use` blocks\"}}",
	},
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// A strict fake answers a broken history as the real API does, keeps the
// violation, fails the test naming rule and message, and never asks the
// policy; the next valid request is request 0.
func TestStrictRefusesBrokenHistory(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			var seen []int
			srv := f.start(rec, func(n int, _ llmtest.Request) llmtest.Turn {
				seen = append(seen, n)
				return llmtest.Turn{Content: "fine"}
			})
			status, body := post(t, srv.URL+f.path, f.broken)
			if status != 400 || strings.TrimSpace(body) != f.wantBad {
				t.Errorf("answer %d %s\nwant 400 %s", status, body, f.wantBad)
			}
			errs := rec.reported()
			if len(errs) != 1 || !strings.Contains(errs[0], `rule "tool-without-call" at messages[2]`) || !strings.Contains(errs[0], "> messages[2]") {
				t.Errorf("reported %q, want one failure naming the rule and messages[2]", errs)
			}
			v := srv.Violations()
			if len(v) != 1 || v[0].Rule != strict.RuleToolWithoutCall || v[0].Index != 2 || string(v[0].Body) != f.wantBad {
				t.Errorf("violations %+v", v)
			}
			if status, _ := post(t, srv.URL+f.path, f.valid); status != 200 {
				t.Errorf("valid body answered %d", status)
			}
			if len(seen) != 1 || seen[0] != 0 || len(srv.Requests()) != 1 {
				t.Errorf("policy saw requests %v, recorded %d; want only the valid one, as request 0", seen, len(srv.Requests()))
			}
		})
	}
}

// Lenient hands even a broken body to the policy.
func TestLenientAcceptsBrokenHistory(t *testing.T) {
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			srv := f.start(rec, llmtest.Script(llmtest.Turn{Content: "fine"})).Lenient()
			if status, body := post(t, srv.URL+f.path, f.broken); status != 200 {
				t.Errorf("answer %d %s, want 200", status, body)
			}
			if errs := rec.reported(); len(errs) != 0 || len(srv.Violations()) != 0 || len(srv.Requests()) != 1 {
				t.Errorf("reported %q, violations %v, %d requests", errs, srv.Violations(), len(srv.Requests()))
			}
		})
	}
}

// The real clients see a refused request as the provider's 400, carrying
// the provider's message, not worth a retry. (A broken history never gets
// that far: the clients repair it, see llm.Repair; a tool schema that is
// not an object they send as given.)
func TestClientsSeeTheRealError(t *testing.T) {
	bad := &llm.Request{Model: "m", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{}`}}},
		{Role: llm.RoleUser, Content: "never mind"},
	}, Tools: []llm.ToolSpec{{Name: "read_file", Description: "Read.", Parameters: json.RawMessage(`{"type":"array"}`)}}}
	clients := map[string]func(url string) llm.Model{
		"openai":    func(url string) llm.Model { return openai.New(openai.Config{BaseURL: url}) },
		"anthropic": func(url string) llm.Model { return anthropic.New(anthropic.Config{BaseURL: url}) },
	}
	for _, f := range fakes {
		t.Run(f.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			srv := f.start(rec, llmtest.Script())
			_, err := clients[f.name](srv.URL).Generate(context.Background(), bad)
			var api *llm.APIError
			if !errors.As(err, &api) || api.StatusCode != 400 || llm.IsRetryable(err) || !strings.Contains(api.Message, "schema") {
				t.Errorf("error %v, want a 400 about the tool's schema", err)
			}
			if v := srv.Violations(); len(v) != 1 || v[0].Rule != strict.RuleToolSchema {
				t.Errorf("violations %+v", v)
			}
			if len(rec.reported()) != 1 {
				t.Errorf("reported %q", rec.reported())
			}
		})
	}
}
