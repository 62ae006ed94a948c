package eval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// fixture is a home with three small worlds (one per family) and a
// loopback endpoint that plays an agent: on its first turn it delivers the
// world's reference solution (found by the objective in the request), on
// the second it finishes. Model "big" reports ten times the tokens and
// answers the search world wrongly.
type fixture struct {
	home   string
	worlds []*world.World
	srv    *llmtest.Server
	sbx    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{home: t.TempDir(), sbx: sandbox.KindAuto}
	if _, err := sandbox.New(sandbox.KindAuto); err != nil {
		f.sbx = "none"
	}
	st := world.NewStore(f.home)
	for _, fam := range gen.Families {
		dir := filepath.Join(t.TempDir(), fam)
		if _, err := gen.Generate(gen.Spec{Family: fam, Seed: 5, Level: 1}, dir); err != nil {
			t.Fatal(err)
		}
		w, _, err := st.Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		f.worlds = append(f.worlds, w)
	}
	calls := map[string][]llm.ToolCall{}
	for _, w := range f.worlds {
		cs, err := SolutionCalls(w)
		if err != nil {
			t.Fatal(err)
		}
		calls[w.Manifest.Contract.Objective] = cs
	}
	f.srv = llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		var objective string
		turn := 0
		for _, m := range req.Messages {
			if m.Role == "user" && objective == "" {
				objective = m.Content
			}
			if m.Role == "assistant" {
				turn++
			}
		}
		usage := llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, Reported: true}
		if req.Model == "big" {
			usage = llm.Usage{PromptTokens: 1000, CompletionTokens: 200, TotalTokens: 1200, Reported: true}
		}
		if turn > 0 {
			return llmtest.Turn{Calls: []llm.ToolCall{{Name: "finish", Arguments: `{"summary":"done"}`}}, Usage: &usage}
		}
		for obj, cs := range calls {
			if strings.HasPrefix(objective, obj) {
				out := append([]llm.ToolCall(nil), cs...)
				if req.Model == "big" && strings.Contains(obj, "corpus") {
					for i, c := range out {
						if strings.Contains(c.Arguments, "answer.txt") {
							out[i].Arguments = `{"path":"/outputs/answer.txt","content":"Nowhere\n"}`
						}
					}
				}
				return llmtest.Turn{Calls: out, Usage: &usage}
			}
		}
		return llmtest.Turn{Content: "no world matches", Status: 400}
	})
	return f
}

func (f *fixture) suite() *Suite {
	s := &Suite{Name: "t", Rollouts: 2, Configs: []Config{
		{Name: "small", Model: "small"},
		{Name: "big", Model: "big", Mode: "react"},
	}}
	for _, w := range f.worlds {
		s.Worlds = append(s.Worlds, WorldRef{ID: w.ID})
	}
	return s
}

// gate holds back the model calls of one world until released.
type gate struct {
	inner llm.Model
	wait  func(ctx context.Context) error
}

func (g gate) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.inner.Generate(ctx, req)
}

func (f *fixture) options(slow string, wait func(context.Context) error) Options {
	return Options{Home: f.home, Parallel: 5, Sandbox: f.sbx, NewModel: func(c Config, w *world.World) (llm.Model, record.ModelSettings, error) {
		var m llm.Model = openai.New(openai.Config{BaseURL: f.srv.URL, Model: c.Model})
		if w.ID == slow {
			m = gate{m, wait}
		}
		return m, record.ModelSettings{Provider: "openai", Name: c.Model, BaseURL: f.srv.URL}, nil
	}}
}

// TestSlowRolloutDoesNotHoldBackFinishedOnes: the slow world's rollouts
// may only proceed once every other rollout's line is in results.jsonl, so
// the eval can only end if finished lines are written while a rollout is
// still running.
func TestSlowRolloutDoesNotHoldBackFinishedOnes(t *testing.T) {
	f := newFixture(t)
	slow := f.worlds[0].ID // queued first: its rollouts hold four of the five workers
	var id string
	var mu sync.Mutex
	var seenBeforeSlow int
	opts := f.options(slow, func(ctx context.Context) error {
		for {
			mu.Lock()
			cur := id
			mu.Unlock()
			if cur != "" {
				if rs, _ := ReadResults(f.home, cur); len(rs) >= 8 {
					n := len(rs)
					mu.Lock()
					seenBeforeSlow = max(seenBeforeSlow, n)
					mu.Unlock()
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			waitALittle()
		}
	})
	// The eval id is known only once Start made it: the plan file names it.
	opts.Clock = nil
	s := f.suite()
	idCh := make(chan string, 1)
	go func() {
		for {
			if ids, _ := filepath.Glob(filepath.Join(f.home, "evals", "e-*")); len(ids) == 1 {
				idCh <- filepath.Base(ids[0])
				return
			}
			waitALittle()
		}
	}()
	done := make(chan error, 1)
	var got string
	go func() {
		var err error
		got, err = Start(context.Background(), s, opts)
		done <- err
	}()
	cur := <-idCh
	mu.Lock()
	id = cur
	mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got != cur {
		t.Fatalf("eval id %s, directory %s", got, cur)
	}
	if seenBeforeSlow < 8 {
		t.Fatalf("the slow rollouts started before the 8 fast lines were written (%d)", seenBeforeSlow)
	}
	plan, _ := ReadPlan(f.home, got)
	rs, _ := ReadResults(f.home, got)
	if len(rs) != 12 {
		t.Fatalf("%d results, want 12", len(rs))
	}
	for i, r := range rs[:8] {
		if r.World == slow {
			t.Errorf("line %d is the slow world's, before a fast one", i)
		}
	}
	rep := Summarize(plan, rs)
	small, big := rep.Configs[0], rep.Configs[1]
	if small.PassRate != 1 || small.Passed != 6 {
		t.Errorf("small: pass rate %v (%d of %d), want all: %+v", small.PassRate, small.Passed, small.Rollouts, rs)
	}
	if big.Passed != 4 || big.Lift >= 0 {
		t.Errorf("big: %d passed, lift %v; want 4 and negative", big.Passed, big.Lift)
	}
	// Ten times the tokens a call, and its two wrong answers each get a
	// repair turn (their finish is refused once): 14 calls to small's 12.
	if r := big.ComputeRatio; r == nil {
		t.Error("big: no compute ratio")
	} else if *r < 11.5 || *r > 11.8 {
		t.Errorf("big: compute ratio %v, want 10 × 14/12 ≈ 11.67", *r)
	}
	if lo, hi := small.Interval[0], small.Interval[1]; !(lo > 0.5 && lo < 1 && hi == 1) {
		t.Errorf("small: 95%% interval %v for 6/6", small.Interval)
	}
	if small.Mean.Completeness == nil || *small.Mean.Completeness != 1 || small.Mean.Tokens != 240 {
		t.Errorf("small: mean vector %+v", small.Mean)
	}
}

// TestResumeRunsOnlyWhatIsMissing stops an eval after some rollouts
// finished and resumes it: every rollout ends with exactly one line and the
// lines written before the stop are kept as they were.
func TestResumeRunsOnlyWhatIsMissing(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls sync.Map
	opts := f.options("", nil)
	opts.Parallel = 2
	inner := opts.NewModel
	var mu sync.Mutex
	started := 0
	opts.NewModel = func(c Config, w *world.World) (llm.Model, record.ModelSettings, error) {
		mu.Lock()
		started++
		if started == 5 {
			cancel() // a stop in the middle of the eval
		}
		mu.Unlock()
		calls.Store(w.ID+c.Name, true)
		return inner(c, w)
	}
	id, err := Start(ctx, f.suite(), opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped eval: %v, want context.Canceled", err)
	}
	before, _ := ReadResults(f.home, id)
	if len(before) == 0 || len(before) >= 12 {
		t.Fatalf("%d results before resume; want some, not all", len(before))
	}
	opts.NewModel = inner
	reran := 0
	opts.NewModel = func(c Config, w *world.World) (llm.Model, record.ModelSettings, error) {
		mu.Lock()
		reran++
		mu.Unlock()
		return inner(c, w)
	}
	if err := Resume(context.Background(), id, opts); err != nil {
		t.Fatal(err)
	}
	after, _ := ReadResults(f.home, id)
	if len(after) != 12 {
		t.Fatalf("%d results after resume, want 12", len(after))
	}
	if reran != 12-len(before) {
		t.Errorf("resume ran %d rollouts, want the %d missing", reran, 12-len(before))
	}
	seen := map[key]bool{}
	for i, r := range after {
		if seen[r.key()] {
			t.Errorf("rollout %v has two lines", r.key())
		}
		seen[r.key()] = true
		if i < len(before) && r.RunID != before[i].RunID {
			t.Errorf("line %d changed on resume", i)
		}
	}
}

// TestScriptedInterventionIsDeliveredAndJudged: an intervention scheduled
// after the first turn reaches the agent before its second, and counts as
// reflected only when its expect clause holds on the terminal state.
func TestScriptedInterventionIsDeliveredAndJudged(t *testing.T) {
	f := newFixture(t)
	w := f.worlds[0]
	calls, _ := SolutionCalls(w)
	obeys := func(obey bool) llm.Model {
		return scripted.New(func(turn int, req *llm.Request) (*llm.Response, error) {
			msg := llm.Message{Role: llm.RoleAssistant}
			told := false
			for _, m := range req.Messages {
				told = told || (m.Role == llm.RoleUser && strings.Contains(m.Content, "write DONE"))
			}
			switch {
			case turn == 0:
				msg.ToolCalls = calls
			case turn == 1 && told && obey:
				msg.ToolCalls = []llm.ToolCall{{ID: "x", Name: "write_file", Arguments: `{"path":"/workspace/extra.txt","content":"DONE\n"}`}}
			default:
				msg.ToolCalls = []llm.ToolCall{{ID: "f", Name: "finish", Arguments: `{"summary":"ok"}`}}
			}
			return &llm.Response{Message: msg, Usage: llm.Usage{TotalTokens: 10}}, nil
		})
	}
	iv := []Intervention{{AfterTurns: 1, Text: "Also write DONE to /workspace/extra.txt", Expect: Expect{Path: "/workspace/extra.txt", Contains: "DONE"}}}
	s := &Suite{Name: "iv", Rollouts: 1, Worlds: []WorldRef{{ID: w.ID}}, Configs: []Config{
		{Name: "obeys", Interventions: iv}, {Name: "ignores", Interventions: iv}, {Name: "none"},
	}}
	opts := f.options("", nil)
	opts.NewModel = func(c Config, _ *world.World) (llm.Model, record.ModelSettings, error) {
		return obeys(c.Name == "obeys"), record.ModelSettings{Provider: "scripted"}, nil
	}
	id, err := Start(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := ReadResults(f.home, id)
	got := map[string]*float64{}
	for _, r := range rs {
		got[r.Config] = r.Intervention
	}
	if v := got["obeys"]; v == nil || *v != 1 {
		t.Errorf("obeying agent: intervention %v, want 1", v)
	}
	if v := got["ignores"]; v == nil || *v != 0 {
		t.Errorf("ignoring agent: intervention %v, want 0", v)
	}
	if v := got["none"]; v != nil {
		t.Errorf("no intervention scheduled: %v, want null", *v)
	}
}

func TestRolloutRuns(t *testing.T) {
	home := t.TempDir()
	for id, files := range map[string]map[string]string{
		"e-1": {startedFile: `{"world":"w","config":"c","rollout":0,"run_id":"r1"}` + "\n" + `{"run_id":"r2"}` + "\n{torn", ResultsFile: `{"run_id":"r1","status":"completed"}` + "\n"},
		"e-2": {ResultsFile: `{"run_id":"r3"}` + "\n"},
	} {
		os.MkdirAll(Dir(home, id), 0o755)
		for f, text := range files {
			os.WriteFile(filepath.Join(Dir(home, id), f), []byte(text), 0o644)
		}
	}
	got := RolloutRuns(home)
	if len(got) != 3 || got["r1"] != "e-1" || got["r2"] != "e-1" || got["r3"] != "e-2" {
		t.Errorf("RolloutRuns = %v", got)
	}
	if len(RolloutRuns(t.TempDir())) != 0 {
		t.Error("rollouts in an empty home")
	}
}
