package run_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
)

const repairRubric = `  - kind: rubric
    name: quality
    judge_model: judge-m
    dimensions:
      - {name: accuracy, description: the total is right, threshold: 8}
`

// repairRun runs an agent (a single agent, or a lead) that writes a draft
// of /outputs/report.md and finishes; when its finish is refused with
// "want" in the failures, it writes the fixed report (it holds FIXED) and
// finishes again. The judge scores accuracy 9 for a report holding FIXED,
// else 5. It returns the summary, the judge's requests and the record.
func repairRun(t *testing.T, mode, sbx, verify, want string, fixedFirst bool) (run.Summary, int, []record.Event, bool) {
	t.Helper()
	c, err := contract.Parse([]byte("objective: Write the report\ndeliverables:\n  - path: /outputs/report.md\n    non_empty: true\nverify:\n"+verify), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	draft := "# Report\nThe total is 41.\n"
	if fixedFirst {
		draft = "# Report\nThe total is 42. FIXED\n"
	}
	var mu sync.Mutex
	judged, turn := 0, 0
	repaired := false
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		if roleOf(req) == "judge" {
			judged++
			score := 5
			if strings.Contains(string(req.Raw), "FIXED") {
				score = 9
			}
			return calls(tc("score", `{"scores":[{"dimension":"accuracy","score":`+map[bool]string{true: "9", false: "5"}[score == 9]+`,"justification":"checked"}]}`))
		}
		turn++
		if turn == 1 {
			return calls(tc("claim_outputs", `{"paths":["/outputs/report.md"]}`),
				tc("write_file", `{"path":"/outputs/report.md","content":`+quoteJSON(draft)+`}`))
		}
		last := req.Messages[len(req.Messages)-1].Content
		if strings.Contains(last, "This is your one repair turn") && strings.Contains(last, want) {
			repaired = true
			return calls(tc("write_file", `{"path":"/outputs/report.md","content":"# Report\nThe total is 42. FIXED\n"}`))
		}
		return calls(tc("finish", `{"summary":"written"}`))
	})
	cfg := config(t, "repair-"+mode, nil)
	cfg.Contract = c
	cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	cfg.Mode, cfg.Sandbox = mode, sbx
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := record.Read(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return s, judged, rc.Events, repaired
}

func quoteJSON(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// refusals are the record's precheck events that refused a finish.
func refusals(evs []record.Event) []record.Precheck {
	var out []record.Precheck
	for _, e := range evs {
		var pc record.Precheck
		if e.Type == record.TypePrecheck && e.Decode(&pc) == nil && pc.Refused {
			out = append(out, pc)
		}
	}
	return out
}

// A rubric clause the deliverable fails at the first finish gives the
// agent (single or lead) its one repair turn with the judge's failure;
// the repaired report passes the final gate. A report that passes at the
// first finish is judged once: the final gate takes the finish's result
// since the planes did not change.
func TestFinalGateRubricRepairTurn(t *testing.T) {
	for _, mode := range []string{run.ModeReact, run.ModeTeam} {
		t.Run(mode, func(t *testing.T) {
			s, judged, evs, repaired := repairRun(t, mode, "none", repairRubric, "accuracy 5 < 8", false)
			if !repaired {
				t.Fatalf("the agent never saw the rubric failure in a repair turn (status %s, failures %q)", s.Status, s.Failures)
			}
			if s.Status != run.StatusCompleted {
				t.Fatalf("status %s (%s), failures %q; want completed after the repair", s.Status, s.Termination, s.Failures)
			}
			rf := refusals(evs)
			if len(rf) != 1 || rf[0].Clauses != 1 || rf[0].Trigger != record.PrecheckFinish || !strings.Contains(strings.Join(rf[0].Failures, "\n"), "(rubric): below threshold") {
				t.Fatalf("refusals %+v; want one at finish naming the rubric clause", rf)
			}
			if judged != 2 {
				t.Errorf("judge requests = %d; want 2 (the first finish, and the final gate on the repaired report)", judged)
			}
		})
	}
	t.Run("passing at the first finish is judged once", func(t *testing.T) {
		s, judged, evs, _ := repairRun(t, run.ModeReact, "none", repairRubric, "accuracy", true)
		if s.Status != run.StatusCompleted || len(refusals(evs)) != 0 {
			t.Fatalf("status %s, refusals %v; want completed without a repair turn", s.Status, refusals(evs))
		}
		if judged != 1 {
			t.Errorf("judge requests = %d; want 1 (the final gate reuses the finish's verdict on unchanged planes)", judged)
		}
		if len(s.Verify) != 1 || !s.Verify[0].Passed || len(s.Verify[0].Scores) != 1 {
			t.Errorf("verification %+v; want the rubric passed with its score", s.Verify)
		}
	})
}

// A tests clause (a command in a fresh sandbox) that fails at the first
// finish gives the repair turn too, with the clause named; after the fix
// the final gate runs it again and passes.
func TestFinalGateTestsClauseRepairTurn(t *testing.T) {
	runtest.NeedSandbox(t)
	clause := "  - kind: tests\n    name: fixed\n    command: grep -q FIXED /outputs/report.md\n"
	s, _, evs, repaired := repairRun(t, run.ModeReact, runtest.SandboxKind(), clause, "(tests): tests failed", false)
	if !repaired || s.Status != run.StatusCompleted {
		t.Fatalf("repaired %v, status %s, failures %q; want a repair turn, then completed", repaired, s.Status, s.Failures)
	}
	if rf := refusals(evs); len(rf) != 1 || rf[0].Clauses != 1 {
		t.Fatalf("refusals %+v; want one that ran the tests clause", rf)
	}
	if len(s.Verify) != 1 || !s.Verify[0].Passed {
		t.Errorf("verification %+v; want the tests clause passed on the repaired report", s.Verify)
	}
}
