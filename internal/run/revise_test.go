package run_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// The writer revises, never starts over: the lead's report holds a line
// citing K1, which a verifier supported on its own evidence, and a draft
// line. A writer that rewrites the report whole, or deletes or rewords the
// verified line, is refused and nothing changes; its edit of the draft
// line goes through. The delivered report keeps the verified line verbatim.
func TestWriterKeepsVerifiedClaims(t *testing.T) {
	const verified = "The total of n is 42 [K1] (from /inputs/data.csv)."
	const leadText = "# Total\n\n" + verified + "\n\nDRAFT-NOTE-8812 still to check.\n"
	inputs := t.TempDir()
	put(t, filepath.Join(inputs, "data.csv"), "n\n40\n2\n")
	c, err := contract.Parse([]byte("objective: Sum n and report it\ndeliverables:\n  - path: /outputs/report.md\n    non_empty: true\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lead, wturn := 0, 0
	var writerResults []string // what each of the writer's writes returned
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch roleOf(req) {
		case llm.CallerSubagent:
			return calls(tc("report", `{"summary":"summed","claims":[{"text":"the total of n is 42","evidence":["/inputs/data.csv"]}]}`))
		case llm.CallerVerifier:
			return calls(tc("verdict", `{"verdict":"supported","checks":["awk sum: 42"]}`))
		case "writer":
			wturn++
			if wturn > 2 {
				writerResults = append(writerResults, req.Messages[len(req.Messages)-1].Content)
			}
			switch wturn {
			case 1:
				return calls(tc("claim_outputs", `{"paths":["/outputs/report.md"]}`))
			case 2: // start over, rewording the verified line
				return calls(tc("write_file", `{"path":"/outputs/report.md","content":"# Report\n\nThe sum is 42 [K1].\n"}`))
			case 3: // delete the verified line
				return calls(tc("edit_file", `{"path":"/outputs/report.md","old_text":"`+verified+`\n","new_text":""}`))
			case 4: // reword it in place
				return calls(tc("edit_file", `{"path":"/outputs/report.md","old_text":"is 42 [K1]","new_text":"is forty-two [K1]"}`))
			case 5: // revise the draft line only: accepted
				return calls(tc("edit_file", `{"path":"/outputs/report.md","old_text":"DRAFT-NOTE-8812 still to check.","new_text":"Both rows were summed [K1]."}`))
			}
			return calls(tc("finish", `{"summary":"revised the draft line; kept the verified one"}`))
		}
		lead++
		switch lead {
		case 1:
			return calls(tc("board_add", `{"title":"sum","objective":"sum n"}`),
				tc("dispatch", `{"item":"T1","role":"summer","instructions":"Sum n.","tools":["read_file"]}`))
		case 2:
			return calls(tc("wait", `{"timeout_s":5}`))
		case 3:
			return calls(tc("verify", `{"claim":"K1"}`),
				tc("board_resolve", `{"id":"T1","note":"verified","refs":["report:A1"]}`),
				tc("claim_outputs", `{"paths":["/outputs/report.md"]}`),
				tc("write_file", `{"path":"/outputs/report.md","content":`+quoteJSON(leadText)+`}`))
		}
		return calls(tc("finish", `{"summary":"done"}`))
	})
	cfg := config(t, "revise", nil)
	cfg.Contract, cfg.InputsDir = c, inputs
	cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	cfg.Mode, cfg.Sandbox = run.ModeTeam, "none"
	cfg.Settings.Team.Synthesis = run.SynthesisOn
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusCompleted {
		t.Fatalf("status %s (%s): %s %q", s.Status, s.Termination, s.Error, s.Failures)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writerResults) < 4 {
		t.Fatalf("the writer made %d writes; want 4", len(writerResults))
	}
	for i, what := range []string{"a whole rewrite", "deleting the verified line", "rewording it"} {
		if r := writerResults[i]; !strings.Contains(r, "refused, nothing was changed") || !strings.Contains(r, verified) {
			t.Errorf("%s was not refused with the line to keep: %q", what, r)
		}
	}
	if r := writerResults[3]; strings.Contains(r, "refused") {
		t.Errorf("the edit of the draft line was refused: %q", r)
	}
	got, err := os.ReadFile(filepath.Join(s.RunDir, "outputs", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), verified) || strings.Contains(string(got), "DRAFT-NOTE-8812") || !strings.Contains(string(got), "Both rows were summed [K1].") {
		t.Errorf("report after synthesis:\n%s\nwant the verified line verbatim and the draft line revised", got)
	}
	// The writer was told which lines it must keep.
	for _, req := range srv.Requests() {
		if roleOf(req) == "writer" {
			if !strings.Contains(string(req.Raw), "Lines 3 cite only verified claims") {
				t.Errorf("the writer's task does not name the kept line")
			}
			break
		}
	}
	rc, err := record.Read(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range rc.Events {
		var tr record.ToolResult
		if e.Type == record.TypeToolResult && e.Decode(&tr) == nil && tr.IsError && strings.Contains(tr.Output, "verified statement") {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d refused writes on the record; want 3", refused)
	}
}
