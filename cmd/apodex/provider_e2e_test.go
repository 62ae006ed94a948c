package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// An endpoint whose window is smaller than --context-window answers a long
// prompt with OpenAI's context_length_exceeded: the run compacts, sends a
// shorter prompt, learns the window and completes.
func TestEndpointOverflowCompactsAndCompletes(t *testing.T) {
	const limit = 16000 // tokens, as len(body)/4
	home, inputs := t.TempDir(), lrFiles(t, 10, 24<<10)
	var refused []int
	srv := llmtest.NewOpenAI(t, func(_ int, req llmtest.Request) llmtest.Turn {
		if len(req.Tools) == 0 { // a summary request
			return llmtest.Turn{Content: "Summary: read files f01 to f10 with read_file.", Usage: lrUsage(req)}
		}
		if n := lrTokens(req); n > limit {
			refused = append(refused, n)
			return llmtest.Turn{Status: 400, Body: fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, limit, n)}
		}
		read := 0
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				if c.Name == "read_file" {
					read++
				}
			}
		}
		if read < 10 {
			return llmtest.Turn{Calls: []llm.ToolCall{call("read_file", map[string]any{"path": "/inputs/" + lrName(read+1)})}, Usage: lrUsage(req)}
		}
		return llmtest.Turn{Calls: []llm.ToolCall{finish("read all ten")}, Usage: lrUsage(req)}
	})
	s := peRun(t, 0, append(openaiArgs(home, srv), "--inputs", inputs, "--context-window", "1000000", "read every file")...)
	if s.Status != "completed" || len(refused) == 0 {
		t.Fatalf("status %s after %d refusals", s.Status, len(refused))
	}
	reqs := srv.Requests()
	for i := 0; i+1 < len(reqs); i++ {
		if lrTokens(reqs[i]) > limit && len(reqs[i].Tools) > 0 && lrTokens(reqs[i+1]) >= lrTokens(reqs[i]) {
			t.Fatalf("request %d (%d tokens) was refused and the next is not shorter (%d)", i, lrTokens(reqs[i]), lrTokens(reqs[i+1]))
		}
	}
	var forced int
	for _, c := range decodeAll[record.Compaction](t, runtest.Events(t, s.RunDir), record.TypeCompaction) {
		if c.Reason == record.ReasonProviderOverflow {
			forced++
			if c.Window != limit || !strings.Contains(c.ProviderError, "context length") {
				t.Fatalf("the compaction did not learn the provider's window: %+v", c)
			}
		}
	}
	if forced == 0 {
		t.Fatal("no compaction with reason provider_overflow in the record")
	}
	if len(refused) > forced {
		t.Fatalf("%d refusals for %d forced compactions: the learned window did not keep later prompts under it", len(refused), forced)
	}
}

// A streamed reply of garbage is named for what it is, after at most three
// attempts.
func TestEndpointGarbageStream(t *testing.T) {
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Body: "<html><body>upstream gateway error</body></html>\n"}
	})
	s := peRun(t, 1, append(openaiArgs(home, srv), "say hi")...)
	if s.Termination != "model_error" || !strings.Contains(s.Error, "sent a line that is not SSE/JSON") || !strings.Contains(s.Error, "upstream gateway error") {
		t.Fatalf("termination %s, error %q", s.Termination, s.Error)
	}
	if n := len(srv.Requests()); n > 3 {
		t.Fatalf("%d attempts at a reply that is not a stream, want at most 3", n)
	}
}

// doctor says an endpoint's HTTP 500 is a server error, not a refusal of
// the tools field.
func TestDoctorServerError(t *testing.T) {
	clearModelEnv(t)
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn { return llmtest.Turn{Status: 500} })
	srv.SetModels("m")
	_, out, _ := cli(t, "doctor", "--home", t.TempDir(), "--provider", "openai", "--base-url", srv.URL, "--model", "m")
	if !regexpLine(out, `FAIL\s+endpoint\s+tool-call probe: the server failed with HTTP 500 \(a 5xx`) || strings.Contains(out, "refused a request with tools") {
		t.Fatalf("doctor output:\n%s", out)
	}
}

// teamLongPolicy plays a lead that fans four subagents out, waits for each
// long report, reads the inputs and resolves: with a small window its
// history goes through tier 1 and tier 2 while reports are in it.
func teamLongPolicy() func(int, llmtest.Request) llmtest.Turn {
	var mu sync.Mutex
	lead, reported := 0, map[string]bool{}
	return func(_ int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		usage := lrUsage(req)
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSummarizer:
			return llmtest.Turn{Content: "Summary: four items T1-T4 were added and dispatched to A1-A4; reports came back.", Usage: usage}
		case llm.CallerVerifier:
			return llmtest.Turn{Calls: []llm.ToolCall{call("verdict", map[string]any{"verdict": "supported", "checks": []string{"read"}})}, Usage: usage}
		case llm.CallerSubagent:
			if teamCalled(req, "read_file") == 0 {
				return llmtest.Turn{Calls: []llm.ToolCall{call("read_file", map[string]any{"path": "/inputs/" + lrName(1)})}, Usage: usage}
			}
			long := strings.Repeat("The file holds numbered lines about a fox; nothing else. ", 60)
			return llmtest.Turn{Calls: []llm.ToolCall{call("report", map[string]any{"summary": long,
				"claims": []map[string]any{{"text": "f01 is about a fox", "evidence": []string{"/inputs/" + lrName(1)}}}})}, Usage: usage}
		}
		for _, m := range req.Messages {
			for i := 1; i <= 4; i++ {
				if strings.Contains(m.Content, fmt.Sprintf("Assignment A%d (", i)) {
					reported[fmt.Sprint(i)] = true
				}
			}
		}
		lead++
		var cs []llm.ToolCall
		switch {
		case lead == 1:
			for i := 1; i <= 4; i++ {
				cs = append(cs, call("board_add", map[string]any{"title": fmt.Sprint("Part ", i), "objective": fmt.Sprint("Read part ", i, " and report")}))
			}
		case lead == 2:
			for i := 1; i <= 4; i++ {
				cs = append(cs, call("dispatch", map[string]any{"item": fmt.Sprint("T", i), "role": "reader", "instructions": "Read f01 and report.", "tools": []string{"read_file"}}))
			}
		case len(reported) < 4:
			cs = append(cs, call("wait", map[string]any{"timeout_s": 30}))
		case lead < 16 && teamCalled(req, "board_resolve") == 0:
			cs = append(cs, call("read_file", map[string]any{"path": "/inputs/" + lrName(2+lead%8)}))
		case teamCalled(req, "board_resolve") == 0:
			for i := 1; i <= 4; i++ {
				cs = append(cs, call("board_resolve", map[string]any{"id": fmt.Sprint("T", i), "note": "read", "refs": []string{fmt.Sprint("report:A", i)}}))
			}
		default:
			cs = append(cs, finish("all four parts read"))
		}
		return llmtest.Turn{Calls: cs, Usage: usage}
	}
}

// A long team run with a small window, through tier-2 compaction, sends
// only requests the real APIs accept: to a strict OpenAI-compatible fake
// and to a strict Anthropic fake (each refuses, and fails the test on, any
// request the real API would refuse).
func TestTeamCompactionValidForBothProviders(t *testing.T) {
	runtest.NeedSandbox(t)
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			home, inputs := t.TempDir(), lrFiles(t, 10, 6<<10)
			start := llmtest.NewOpenAI
			if provider == "anthropic" {
				start = llmtest.NewAnthropic
			}
			srv := start(t, teamLongPolicy())
			s := peRun(t, 0, "run", "--home", home, "--provider", provider, "--base-url", srv.URL, "--model", "m",
				"--mode", "team", "--inputs", inputs, "--context-window", "9000", "read the parts")
			if s.Status != "completed" {
				t.Fatalf("status %s (%s): %s", s.Status, s.Termination, s.Error)
			}
			if v := srv.Violations(); len(v) > 0 {
				t.Fatalf("%d requests the real API would refuse, the first: %v", len(v), v[0])
			}
			var tier2, carried int
			for _, e := range runtest.Events(t, s.RunDir) {
				var w record.Warning
				if e.Type == record.TypeWarning && e.Decode(&w) == nil && w.Code == record.WarnInvalidHistory {
					t.Fatalf("the runtime broke a history (the client repaired it): %s", w.Message)
				}
				if e.Type != record.TypeCompaction || e.Agent != "lead" {
					continue
				}
				var c record.Compaction
				e.Decode(&c)
				if c.Tier == 2 && c.Summarized != nil {
					tier2++
					carried += c.Summarized.Carried
				}
			}
			if tier2 == 0 || carried == 0 {
				t.Fatalf("the lead went through %d tier-2 compactions carrying %d reports: the test proves nothing", tier2, carried)
			}
		})
	}
}

// A provider's 400 that is neither an overflow nor a schema problem ends
// the run as model_error with the provider's message, the record complete;
// once the endpoint answers, resume goes on from where the run was.
func TestProviderRefusalEndsAndResumes(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	bad := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n == 0 {
			return calls(call("write_file", map[string]any{"path": "/outputs/a.txt", "content": "one\n"}))
		}
		return llmtest.Turn{Status: 400, Body: `{"error":{"message":"Unsupported value: 'temperature' does not support 0.3 with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`}
	})
	s := peRun(t, 1, append(openaiArgs(home, bad), "write a.txt")...)
	if s.Termination != "model_error" || !strings.Contains(s.Error, "does not support 0.3") {
		t.Fatalf("termination %s, error %q", s.Termination, s.Error)
	}
	if len(bad.Requests()) != 2 {
		t.Fatalf("%d requests: a 400 is not retried", len(bad.Requests()))
	}
	if last := runtest.Events(t, s.RunDir); last[len(last)-1].Type != record.TypeRunFinished {
		t.Fatalf("the record does not end with run_finished: %s", last[len(last)-1].Type)
	}
	good := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if !teamSeen(req, "/outputs/a.txt") {
			t.Errorf("the resumed history lost the first turn: %+v", req.Messages)
		}
		return calls(finish("a.txt written"))
	})
	code, out, errOut := cli(t, "resume", "--home", home, "--base-url", good.URL, "--json", "--quiet", filepath.Base(s.RunDir))
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if r := decodeSummary(t, out); r.Termination != "completed" || len(good.Requests()) != 1 {
		t.Fatalf("resumed run ended %s after %d requests", r.Termination, len(good.Requests()))
	}
	var resumed []record.Resumed
	resumed = decodeAll[record.Resumed](t, runtest.Events(t, s.RunDir), record.TypeResumed)
	if len(resumed) != 1 || !strings.Contains(resumed[0].Reason, "model_error") {
		t.Fatalf("resumed events %+v", resumed)
	}
	// show names the endpoint of each segment: the old one, then the new.
	_, shown, _ := cli(t, "show", "--home", home, filepath.Base(s.RunDir))
	if !strings.Contains(shown, "model:       openai m "+bad.URL+"\n") || !regexpLine(shown, `^resumed:     after event \d+: openai m `+regexp.QuoteMeta(good.URL)+` \(the run ended with model_error`) {
		t.Errorf("show does not name each segment's endpoint (%s, then %s):\n%s", bad.URL, good.URL, shown)
	}
}
