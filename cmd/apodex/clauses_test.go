package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/run"
)

// clauseRun runs a single agent that writes /outputs/report.md under a
// task with the given verify clauses; judge answers the judge's request.
func clauseRun(t *testing.T, verify string, judge func(req llmtest.Request) llmtest.Turn) (home string, code int, stdout string, judged []llmtest.Request) {
	t.Helper()
	home, work := t.TempDir(), t.TempDir()
	task := filepath.Join(work, "task.yaml")
	os.WriteFile(task, []byte("objective: Write a report\ndeliverables:\n  - path: /outputs/report.md\n    non_empty: true\nverify:\n"+verify), 0o644)
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if req.Header.Get(llm.HeaderRole) == "judge" {
			return judge(req)
		}
		if len(req.Messages) <= 2 {
			return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": "# Report\nThe total is 42.\n"}))
		}
		return calls(finish("written"))
	})
	code, stdout, _ = cli(t, append(openaiArgs(home, srv), "--sandbox", "none", "--json", "--task", task)...)
	for _, req := range srv.Requests() {
		if req.Header.Get(llm.HeaderRole) == "judge" {
			judged = append(judged, req)
		}
	}
	return home, code, stdout, judged
}

func scores(clarity, accuracy float64) func(llmtest.Request) llmtest.Turn {
	return func(llmtest.Request) llmtest.Turn {
		return calls(call("score", map[string]any{"scores": []map[string]any{
			{"dimension": "clarity", "score": clarity, "justification": "reads well"},
			{"dimension": "accuracy", "score": accuracy, "justification": "the sum is right"}}}))
	}
}

const rubricClause = `  - kind: rubric
    name: quality
    judge_model: judge-m
    dimensions:
      - {name: clarity, description: easy to follow, threshold: 6}
      - {name: accuracy, description: numbers are right, threshold: 8}
`

// A rubric clause passes with scores over its thresholds and fails below;
// the judge sees the deliverable and the score tool; scores are recorded.
func TestRubricClause(t *testing.T) {
	t.Run("passes", func(t *testing.T) {
		_, code, stdout, judged := clauseRun(t, rubricClause, scores(7, 9))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stdout)
		}
		if len(judged) != 1 || !strings.Contains(string(judged[0].Raw), "The total is 42.") || judged[0].Model != "judge-m" {
			t.Fatalf("judge requests: %d (model %q); want one that reads the report with judge_model", len(judged), judged[0].Model)
		}
		if names := offered(judged[0]); len(names) != 1 || names[0] != "score" {
			t.Errorf("the judge was offered %v; want score", names)
		}
		s := decodeSummary(t, stdout)
		if len(s.Verify) != 1 || !s.Verify[0].Passed || len(s.Verify[0].Scores) != 2 || s.Verify[0].Scores[1].Justification == "" {
			t.Errorf("verification %+v; want passed with 2 justified scores", s.Verify)
		}
	})
	t.Run("fails below a threshold", func(t *testing.T) {
		_, code, stdout, _ := clauseRun(t, rubricClause, scores(7, 5))
		if code == 0 {
			t.Fatal("exit 0; want failure")
		}
		s := decodeSummary(t, stdout)
		if s.Status != run.StatusFailed || !strings.Contains(strings.Join(s.Failures, "\n"), "accuracy 5 < 8") {
			t.Errorf("status %s, failures %q; want the dimension below its threshold", s.Status, s.Failures)
		}
	})
}

func offered(req llmtest.Request) []string {
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// A human clause ends awaiting_review (exit 1); apodex review --approve
// completes the run, and show and runs reflect it.
func TestHumanClauseReview(t *testing.T) {
	home, code, stdout, _ := clauseRun(t, "  - kind: human\n    name: sign-off\n", nil)
	if code != 1 {
		t.Fatalf("exit %d; want 1", code)
	}
	s := decodeSummary(t, stdout)
	if s.Status != run.StatusAwaitingReview {
		t.Fatalf("status %s; want awaiting_review", s.Status)
	}
	if _, text, _ := cli(t, "show", "--home", home, s.RunID); !strings.Contains(text, "status:      awaiting_review") || !strings.Contains(text, "review:      pending") {
		t.Errorf("show while pending: %q", text)
	}
	_, out, _ := cli(t, "runs", "--home", home, "--status", "awaiting_review")
	if !strings.Contains(out, s.RunID) {
		t.Errorf("runs --status awaiting_review: %q", out)
	}
	if code, _, errOut := cli(t, "review", "--home", home, s.RunID); code == 0 || !strings.Contains(errOut, "--approve") {
		t.Errorf("review without a decision: exit %d, %q", code, errOut)
	}
	code, out, errOut := cli(t, "review", "--home", home, "--approve", "--note", "looks right", s.RunID)
	if code != 0 || !strings.Contains(out, "status completed") {
		t.Fatalf("review: exit %d, %q %q", code, out, errOut)
	}
	_, show, _ := cli(t, "show", "--home", home, "--json", s.RunID)
	if !strings.Contains(show, `"status": "completed"`) && !strings.Contains(show, `"status":"completed"`) || !strings.Contains(show, "looks right") {
		t.Errorf("show after approve: %.400s", show)
	}
	if _, text, _ := cli(t, "show", "--home", home, s.RunID); !strings.Contains(text, "review:      approved by user: looks right") {
		t.Errorf("show: %q", text)
	}
	if code, _, errOut := cli(t, "review", "--home", home, "--reject", s.RunID); code == 0 || !strings.Contains(errOut, "not awaiting review") {
		t.Errorf("a second review: exit %d, %q", code, errOut)
	}
}
