package run_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/run"
)

// BenchmarkTeamCost measures what a team run costs in model requests and
// tokens per role, with a loopback endpoint that plays every role (by the
// X-Apodex-Role header): the lead dispatches, a subagent reports K1, the
// lead verifies K1 (supported) and writes the report, the writer revises
// it, a rubric judge scores it. "pass": the lead's report passes the
// rubric; "repair": it fails the rubric first, and the lead fixes it when
// told; "reopen": the subagent's second claim is refuted, the lead
// reopens the item, and the revision restates the verified claim beside
// the redone one (effort adaptive, one wave). Tokens are estimated as a request's bytes / 4 (prompt) and its
// answer's arguments' bytes / 4 (completion), so they compare across
// versions of the runtime, not with a provider's count.
//
//	go test ./internal/run -run '^$' -bench TeamCost -benchtime 3x -count 5
func BenchmarkTeamCost(b *testing.B) {
	for _, sc := range []string{"pass", "repair", "reopen"} {
		b.Run(sc, func(b *testing.B) {
			var last map[string][2]int
			var status string
			for range b.N {
				if sc == "reopen" {
					last, status = reopenCostRun(b)
				} else {
					last, status = teamCostRun(b, sc == "repair")
				}
			}
			total := [2]int{}
			for role, v := range last {
				b.ReportMetric(float64(v[0]), role+"-req/op")
				b.ReportMetric(float64(v[1]), role+"-tok/op")
				total[0] += v[0]
				total[1] += v[1]
			}
			b.ReportMetric(float64(total[0]), "req/op")
			b.ReportMetric(float64(total[1]), "tok/op")
			b.Logf("%s: status %s", sc, status)
		})
	}
}

func teamCostRun(b *testing.B, repair bool) (map[string][2]int, string) {
	b.Helper()
	inputs := b.TempDir()
	data := filepath.Join(inputs, "data.csv")
	writeFileB(b, data, "n\n40\n2\n")
	c, err := contract.Parse([]byte(`objective: Sum n and report it
deliverables:
  - path: /outputs/report.md
    non_empty: true
verify:
  - kind: rubric
    name: quality
    judge_model: judge-m
    dimensions:
      - {name: accuracy, description: the total is right, threshold: 8}
`), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	total := "42"
	if repair {
		total = "41"
	}
	leadText := "# Total\n\nThe total of n is " + total + " [K1].\n\nDRAFT still to check.\n"
	var mu sync.Mutex
	lead, wturn := 0, 0
	fixed := false
	cost := map[string][2]int{}
	srv := llmtest.NewOpenAI(b, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		role := req.Header.Get(llm.HeaderRole)
		turn := func(cs ...llm.ToolCall) llmtest.Turn {
			out := 0
			for _, c := range cs {
				out += len(c.Name) + len(c.Arguments)
			}
			u := llm.Usage{PromptTokens: len(req.Raw) / 4, CompletionTokens: out/4 + 1}
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
			v := cost[role]
			cost[role] = [2]int{v[0] + 1, v[1] + u.TotalTokens}
			return llmtest.Turn{Calls: cs, Usage: &u}
		}
		switch role {
		case llm.CallerSubagent:
			return turn(tc("report", `{"summary":"summed","claims":[{"text":"the total of n is 42","evidence":["/inputs/data.csv"]}]}`))
		case llm.CallerVerifier:
			return turn(tc("verdict", `{"verdict":"supported","checks":["awk sum: 42"]}`))
		case "judge":
			score := "5"
			if strings.Contains(string(req.Raw), "is 42") {
				score = "9"
			}
			return turn(tc("score", `{"scores":[{"dimension":"accuracy","score":`+score+`,"justification":"checked"}]}`))
		case "writer":
			wturn++
			switch wturn {
			case 1:
				return turn(tc("claim_outputs", `{"paths":["/outputs/report.md"]}`))
			case 2:
				return turn(tc("edit_file", `{"path":"/outputs/report.md","old_text":"DRAFT still to check.","new_text":"Both rows were summed [K1]."}`))
			}
			return turn(tc("finish", `{"summary":"revised the draft line"}`))
		}
		lead++
		switch {
		case lead == 1:
			return turn(tc("board_add", `{"title":"sum","objective":"sum n"}`),
				tc("dispatch", `{"item":"T1","role":"summer","instructions":"Sum n.","tools":["read_file"]}`))
		case lead == 2:
			return turn(tc("wait", `{"timeout_s":5}`))
		case lead == 3:
			return turn(tc("verify", `{"claim":"K1"}`),
				tc("board_resolve", `{"id":"T1","note":"verified","refs":["report:A1"]}`),
				tc("claim_outputs", `{"paths":["/outputs/report.md"]}`),
				tc("write_file", `{"path":"/outputs/report.md","content":"`+strings.ReplaceAll(leadText, "\n", `\n`)+`"}`))
		case !fixed && strings.Contains(string(req.Raw), "This is your one repair turn") && strings.Contains(string(req.Raw), "accuracy 5"):
			fixed = true
			return turn(tc("claim_outputs", `{"paths":["/outputs/report.md"]}`),
				tc("edit_file", `{"path":"/outputs/report.md","old_text":"is 41 [K1]","new_text":"is 42 [K1]"}`))
		}
		return turn(tc("finish", `{"summary":"done"}`))
	})
	cfg := run.Config{Home: b.TempDir(), Objective: "Sum n and report it", Contract: c, InputsDir: inputs,
		Model: openai.New(openai.Config{BaseURL: srv.URL, Model: "m"}), NewID: func() string { return "cost" }}
	cfg.Settings = run.Defaults()
	cfg.Settings.MaxAttempts = 1
	cfg.Mode, cfg.Sandbox = run.ModeTeam, "none"
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if os.Getenv("TEAMCOST_DEBUG") != "" {
		b.Logf("failures %q dir %s", s.Failures, s.RunDir)
	}
	return cost, fmt.Sprintf("%s/%s", s.Status, s.Termination)
}

func writeFileB(b *testing.B, path, content string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

func reopenCostRun(b *testing.B) (map[string][2]int, string) {
	b.Helper()
	inputs := b.TempDir()
	writeFileB(b, filepath.Join(inputs, "data.csv"), "n\n40\n2\n")
	const k1 = `{"text":"the total of n is 42","evidence":["/inputs/data.csv"]}`
	var mu sync.Mutex
	lead := 0
	resolved := false
	cost := map[string][2]int{}
	srv := llmtest.NewOpenAI(b, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		role := req.Header.Get(llm.HeaderRole)
		turn := func(cs ...llm.ToolCall) llmtest.Turn {
			out := 0
			for _, c := range cs {
				out += len(c.Name) + len(c.Arguments)
			}
			u := llm.Usage{PromptTokens: len(req.Raw) / 4, CompletionTokens: out/4 + 1}
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
			v := cost[role]
			cost[role] = [2]int{v[0] + 1, v[1] + u.TotalTokens}
			return llmtest.Turn{Calls: cs, Usage: &u}
		}
		raw := string(req.Raw)
		switch role {
		case llm.CallerSubagent:
			if !strings.Contains(raw, "assignment A2") {
				return turn(tc("report", `{"summary":"summed","claims":[`+k1+`,{"text":"the mean of n is 99","evidence":["/inputs/data.csv"]}]}`))
			}
			return turn(tc("report", `{"summary":"redone","claims":[`+k1+`,{"text":"the mean of n is 21","evidence":["/inputs/data.csv"]}]}`))
		case llm.CallerVerifier:
			if strings.Contains(raw, "mean of n is 99") {
				return turn(tc("verdict", `{"verdict":"refuted","repair":"the mean is 21","checks":["awk"]}`))
			}
			return turn(tc("verdict", `{"verdict":"supported","checks":["awk"]}`))
		case "investigator":
			return turn(tc("report", `{"summary":"checked: it holds","claims":[]}`))
		}
		lead++
		switch lead {
		case 1:
			return turn(tc("board_add", `{"title":"stats","objective":"total and mean of n"}`),
				tc("dispatch", `{"item":"T1","role":"statistician","instructions":"Compute them.","tools":["read_file"]}`))
		case 2:
			return turn(tc("wait", `{"timeout_s":5}`))
		case 3:
			return turn(tc("verify", `{"claim":"K1"}`), tc("verify", `{"claim":"K2"}`),
				tc("board_resolve", `{"id":"T1","note":"reported","refs":["report:A1"]}`))
		case 4:
			return turn(tc("board_reopen", `{"id":"T1","reason":"K2 is refuted"}`),
				tc("dispatch", `{"item":"T1","role":"statistician","instructions":"Redo the mean.","tools":["read_file"]}`))
		}
		if !resolved {
			if strings.Contains(raw, "Assignment A2 (statistician) on T1 ended: reported") {
				resolved = true
				return turn(tc("board_resolve", `{"id":"T1","note":"redone","refs":["report:A2"]}`))
			}
			return turn(tc("wait", `{"timeout_s":5}`))
		}
		return turn(tc("finish", `{"summary":"the total is 42, the mean 21"}`))
	})
	cfg := run.Config{Home: b.TempDir(), Objective: "Total and mean of n", InputsDir: inputs,
		Model: openai.New(openai.Config{BaseURL: srv.URL, Model: "m"}), NewID: func() string { return "reopen" }}
	cfg.Settings = run.Defaults()
	cfg.Settings.MaxAttempts = 1
	cfg.Settings.Team.EffortWaves = 1
	cfg.Budget.MaxTurns = 30
	cfg.Mode, cfg.Sandbox = run.ModeTeam, "none"
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return cost, fmt.Sprintf("%s/%s", s.Status, s.Termination)
}
