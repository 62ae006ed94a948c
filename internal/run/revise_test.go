package run_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/claims"
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
		if r := writerResults[i]; !strings.Contains(r, "refused, nothing was changed") || !strings.Contains(r, "line 3 (K1): The total of n is 42 [K1]") {
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
			if !strings.Contains(string(req.Raw), "- line 3: The total of n is 42 [K1]") {
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

// A revision of a reopened item keeps its verified claims: K1 (supported)
// and K2 (refuted) were stated on T1; the lead reopens T1 and dispatches
// it again. The new subagent is told to keep K1 and redo K2; its report is
// refused while it drops K1 or rewrites it, and accepted when it restates
// K1 unchanged beside the redone claim. The restated claim keeps K1's
// verdict (its evidence is an input file), so it is settled without a
// verifier, and effort sends no investigator to it.
func TestRevisionKeepsVerifiedClaims(t *testing.T) {
	inputs := t.TempDir()
	put(t, filepath.Join(inputs, "data.csv"), "n\n40\n2\n")
	const k1 = `{"text":"the total of n is 42","evidence":["/inputs/data.csv"]}`
	var mu sync.Mutex
	lead, sub2, verifiers, finishes := 0, 0, 0, 0
	resolved := false
	var gateSaid []string // what a refused finish was told
	var refusals []string
	var task2 string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		last := req.Messages[len(req.Messages)-1].Content
		switch roleOf(req) {
		case llm.CallerSubagent:
			if !strings.Contains(string(req.Raw), "assignment A2") {
				return calls(tc("report", `{"summary":"summed","claims":[`+k1+`,{"text":"the mean of n is 99","evidence":["/inputs/data.csv"]}]}`))
			}
			sub2++
			if sub2 == 1 {
				task2 = req.Messages[1].Content
			} else {
				refusals = append(refusals, last)
			}
			switch sub2 {
			case 1: // drops K1
				return calls(tc("report", `{"summary":"redone","claims":[{"text":"the mean of n is 21","evidence":["/inputs/data.csv"]}]}`))
			case 2: // rewrites K1's words
				return calls(tc("report", `{"summary":"redone","claims":[{"text":"the total of n is 43","evidence":["/inputs/data.csv"]},{"text":"the mean of n is 21","evidence":["/inputs/data.csv"]}]}`))
			}
			return calls(tc("report", `{"summary":"redone","claims":[`+k1+`,{"text":"the mean of n is 21","evidence":["/inputs/data.csv"]}]}`))
		case llm.CallerVerifier:
			verifiers++
			if strings.Contains(string(req.Raw), "mean of n is 99") {
				return calls(tc("verdict", `{"verdict":"refuted","repair":"the mean is 21","checks":["awk"]}`))
			}
			return calls(tc("verdict", `{"verdict":"supported","checks":["awk"]}`))
		case "investigator":
			return calls(tc("report", `{"summary":"checked","claims":[]}`))
		}
		lead++
		switch lead {
		case 1:
			return calls(tc("board_add", `{"title":"stats","objective":"total and mean of n"}`),
				tc("dispatch", `{"item":"T1","role":"statistician","instructions":"Compute them.","tools":["read_file"]}`))
		case 2:
			return calls(tc("wait", `{"timeout_s":5}`))
		case 3:
			return calls(tc("verify", `{"claim":"K1"}`), tc("verify", `{"claim":"K2"}`),
				tc("board_resolve", `{"id":"T1","note":"reported","refs":["report:A1"]}`))
		case 4:
			return calls(tc("board_reopen", `{"id":"T1","reason":"K2 is refuted"}`),
				tc("dispatch", `{"item":"T1","role":"statistician","instructions":"Redo the mean.","tools":["read_file"]}`))
		}
		if !resolved {
			if strings.Contains(string(req.Raw), "Assignment A2 (statistician) on T1 ended: reported") {
				resolved = true
				return calls(tc("board_resolve", `{"id":"T1","note":"redone","refs":["report:A2"]}`))
			}
			return calls(tc("wait", `{"timeout_s":5}`))
		}
		finishes++
		if finishes > 1 {
			gateSaid = append(gateSaid, last)
		}
		return calls(tc("finish", `{"summary":"the total is 42 [K3], the mean 21 [K4]"}`))
	})
	cfg := config(t, "revision", nil)
	cfg.InputsDir = inputs
	cfg.Model = openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	cfg.Mode, cfg.Sandbox = run.ModeTeam, "none"
	cfg.Settings.Team.Effort, cfg.Settings.Team.EffortWaves = run.EffortAdaptive, 1
	cfg.Budget.MaxTurns = 30
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if s.Status != run.StatusCompleted {
		t.Fatalf("status %s (%s) %s; finish was told %q", s.Status, s.Termination, s.Error, gateSaid)
	}
	if !strings.Contains(task2, "T1 was reopened: this is a revision") || !strings.Contains(task2, "- K1: the total of n is 42") ||
		!strings.Contains(task2, "K2 (refuted") || !strings.Contains(task2, "repair: the mean is 21") {
		t.Errorf("the revision's task does not say what it keeps and redoes:\n%s", task2)
	}
	if len(refusals) != 2 {
		t.Fatalf("%d refused reports; want 2 (dropped K1, rewrote K1): %q", len(refusals), refusals)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "drops or rewrites verified claims: K1") {
			t.Errorf("refusal does not name K1: %q", r)
		}
	}
	rc, err := record.Read(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	l := claims.Fold(rc.Events)
	k3, ok := l.Get("K3")
	if !ok || k3.Text != "the total of n is 42" || k3.Status != claims.Corroborated || !k3.Settled {
		t.Errorf("the restated claim K3 = %+v; want K1's words, corroborated and settled", k3)
	}
	// K3's only verdict is the one carried from K1; no agent was started
	// on it (no verifier, no investigator).
	var carried []string
	for _, e := range rc.Events {
		var v record.Verdict
		var a record.AgentStarted
		var ef record.Effort
		switch {
		case e.Type == record.TypeVerdict && e.Decode(&v) == nil && v.ClaimID == "K3":
			carried = append(carried, e.Agent+": "+v.Verdict+" "+strings.Join(v.Checks, ","))
		case e.Type == record.TypeAgentStarted && e.Decode(&a) == nil && a.Claim == "K3":
			t.Errorf("agent %s (%s) was started on the restated verified claim", e.Agent, a.Role)
		case e.Type == record.TypeEffort && e.Decode(&ef) == nil && (ef.Claim == "K3" || slices.Contains(ef.Claims, "K3")):
			t.Errorf("effort targeted the restated verified claim: %+v", ef)
		}
	}
	if len(carried) != 1 || !strings.HasPrefix(carried[0], "runtime: supported carried from K1") {
		t.Errorf("K3's verdicts %q; want one, carried from K1 by the runtime", carried)
	}
	if verifiers < 2 {
		t.Errorf("%d verifier requests; want the lead's two", verifiers)
	}
}
