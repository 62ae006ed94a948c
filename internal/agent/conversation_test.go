package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/checkpoint"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/anthropic"
	"github.com/apodex/apodex/internal/llm/llmtest/strict"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// The property: whatever a long history holds — parallel calls, protected
// reports, interventions, recalls, errors, malformed arguments — every
// request the loop makes, after tier-1 eviction, tier-2 summaries and a
// resume from any step of the record, is a valid conversation for both
// providers: the runtime's history needs no repair (llm.Problems), and the
// body each client sends passes the strict checks of the fake APIs.

var stubRef = regexp.MustCompile(`call recall \{"ref": "([^"]+)"\}`)

// randomModel plays a random agent; it checks every request it is sent.
type randomModel struct {
	t    testing.TB
	mu   sync.Mutex
	rng  *rand.Rand
	oa   *openai.Client
	an   *anthropic.Client
	seen int
}

func (m *randomModel) check(req *llm.Request) {
	m.t.Helper()
	m.seen++
	if p := llm.Problems(req.Messages); p != nil {
		m.t.Fatalf("request %d (%s): the history is not a valid conversation: %v", m.seen, req.Purpose, p)
	}
	for name, body := range map[string]func(*llm.Request) ([]byte, error){"openai": m.oa.Body, "anthropic": m.an.Body} {
		raw, err := body(req)
		if err != nil {
			m.t.Fatalf("request %d: %s body: %v", m.seen, name, err)
		}
		check := strict.CheckOpenAI
		if name == "anthropic" {
			check = strict.CheckAnthropic
		}
		if v := check(raw); v != nil {
			m.t.Fatalf("request %d (%s) would be refused by %s: %v\n%s", m.seen, req.Purpose, name, v, raw)
		}
	}
}

func (m *randomModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.check(req)
	usage := llm.Usage{PromptTokens: estimate(req.Messages), CompletionTokens: 20, Reported: true}
	usage.TotalTokens = usage.PromptTokens + 20
	switch req.Purpose {
	case llm.PurposeSummary:
		switch m.rng.IntN(6) {
		case 0:
			return nil, fmt.Errorf("summarizer unavailable")
		case 1:
			return &llm.Response{Message: llm.Message{Content: "  "}, Usage: usage}, nil
		}
		return &llm.Response{Message: llm.Message{Content: "SUMMARY: worked on the files."}, Usage: usage}, nil
	case llm.PurposeFinalize:
		return &llm.Response{Message: llm.Message{Content: "partial"}, Usage: usage}, nil
	}
	var calls []llm.ToolCall
	for i := range 1 + m.rng.IntN(3) {
		switch k := m.rng.IntN(10); {
		case k < 3:
			calls = append(calls, llm.ToolCall{Name: "read", Arguments: fmt.Sprintf(`{"n": %d}`, m.rng.IntN(4000))})
		case k < 5:
			calls = append(calls, llm.ToolCall{Name: "wait", Arguments: `{}`})
		case k < 6:
			calls = append(calls, llm.ToolCall{Name: "fail", Arguments: `{}`})
		case k < 7:
			calls = append(calls, llm.ToolCall{Name: "read", Arguments: `{"n": 12`}) // malformed
		case k < 8:
			ref := "nothing"
			for _, msg := range req.Messages {
				if s := stubRef.FindStringSubmatch(msg.Content); s != nil {
					ref = s[1]
				}
			}
			calls = append(calls, llm.ToolCall{Name: "recall", Arguments: fmt.Sprintf(`{"ref": %q}`, ref)})
		default:
			calls = append(calls, llm.ToolCall{Name: "nosuch", Arguments: `{}`})
		}
		if m.rng.IntN(4) == 0 {
			calls[i].ID = "dup" // a server that reuses ids
		}
	}
	text := ""
	if m.rng.IntN(3) == 0 {
		text = strings.Repeat("thinking. ", m.rng.IntN(300))
	}
	if m.rng.IntN(15) == 0 {
		calls = nil // a text-only reply: nudged, or taken as the finish
	}
	return &llm.Response{Message: llm.Message{Content: text, ToolCalls: calls}, Usage: usage}, nil
}

func estimate(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)/4 + 4
		for _, c := range m.ToolCalls {
			n += len(c.Arguments) / 4
		}
	}
	return n
}

type fake struct {
	name string
	fn   func(json.RawMessage) tool.Result
}

func (f fake) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: "fake " + f.name, Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
}
func (f fake) Call(_ context.Context, a json.RawMessage) tool.Result { return f.fn(a) }

func randomTools(rng *rand.Rand) []tool.Tool {
	var mu sync.Mutex
	draw := func(n int) int { mu.Lock(); defer mu.Unlock(); return rng.IntN(n) }
	return []tool.Tool{
		fake{"read", func(a json.RawMessage) tool.Result {
			var args struct{ N int }
			json.Unmarshal(a, &args)
			return tool.Result{Output: "content: " + strings.Repeat("x", args.N*4)}
		}},
		fake{"wait", func(json.RawMessage) tool.Result {
			return tool.Result{Output: "Assignment A1 reported: " + strings.Repeat("finding ", 20+draw(300)), Protected: true}
		}},
		fake{"fail", func(json.RawMessage) tool.Result {
			return tool.Errorf("exit code 1: %s", strings.Repeat("e", draw(2000)))
		}},
		tool.FinishTool{},
	}
}

// coverage counts what the random runs went through, so the property test
// can tell that it exercised what it claims to.
type coverage struct{ tier1, tier2, carried, resumed, interrupted int }

// conversations runs one random agent from seed, then resumes it from a
// random step of its record, checking every request on the way.
func conversations(t testing.TB, seed uint64, cov *coverage) {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := &randomModel{t: t, rng: rng,
		oa: openai.New(openai.Config{Model: "m", Stream: rng.IntN(2) == 0}),
		an: anthropic.New(anthropic.Config{Model: "m", Stream: rng.IntN(2) == 0})}
	dir := t.TempDir()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var inbox sync.Mutex
	cfg := agent.Config{ID: "lead", Model: m, Log: log, Tools: tool.NewSet(randomTools(rng)...), System: "system prompt",
		Retry:   llm.RetryPolicy{MaxAttempts: 1},
		Budget:  agent.Budget{MaxTurns: 8 + rng.IntN(30)},
		Context: agent.Context{Window: 2000 + rng.IntN(12000), KeepTail: 2 + rng.IntN(8), KeepRecent: 1 + rng.IntN(3)},
		BeforeCall: func(context.Context) []llm.Message {
			inbox.Lock()
			defer inbox.Unlock()
			switch rng.IntN(8) {
			case 0:
				return []llm.Message{{Role: llm.RoleUser, Content: checkpoint.UserMessage("M1", "priority_change", "do the big files first")}}
			case 1:
				return []llm.Message{{Role: llm.RoleUser, Content: "[runtime observation] A2 is still running", Protected: true}}
			}
			return nil
		},
	}
	agent.Run(context.Background(), cfg, "task: "+strings.Repeat("the objective. ", rng.IntN(50)))
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Events {
		var cp record.Compaction
		if e.Type != record.TypeCompaction || e.Decode(&cp) != nil {
			continue
		}
		switch {
		case cp.Tier == 1 && len(cp.Evicted) > 0:
			cov.tier1++
		case cp.Tier == 2 && cp.Summarized != nil:
			cov.tier2++
			cov.carried += cp.Summarized.Carried
		}
	}
	// Resume from a random prefix of the record: a process killed there.
	cut := 1 + rng.IntN(len(c.Events))
	agents, err := checkpoint.Agents(dir, c.Events[:cut])
	if err != nil {
		t.Fatal(err)
	}
	a := agents["lead"]
	if a == nil || a.Finished != nil {
		return
	}
	cov.resumed++
	if len(a.Interrupted) > 0 {
		cov.interrupted++
	}
	cfg.Restore = &agent.Restore{History: a.History, Turns: a.Turns, ToolCalls: a.ToolCalls, Usage: a.Usage}
	cfg.Budget.MaxTurns = a.Turns + 1 + rng.IntN(10)
	agent.Run(context.Background(), cfg, "")
}

func TestEveryRequestIsAValidConversation(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 10
	}
	var cov coverage
	for seed := range uint64(n) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { conversations(t, seed, &cov) })
	}
	if cov.tier1 == 0 || cov.tier2 == 0 || cov.carried == 0 || cov.resumed == 0 || cov.interrupted == 0 {
		t.Fatalf("the random runs missed a case the property is about: %+v", cov)
	}
	t.Logf("covered: %+v", cov)
}

func FuzzConversations(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { conversations(t, seed, &coverage{}) })
}
