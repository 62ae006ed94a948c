package main

import (
	"github.com/apodex/apodex/internal/runtest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
)

const leadSecret = "LEAD-HISTORY-ONLY-5521"

// synthesisRun runs a team whose subagent claims the total is 42 and whose
// report deliverable is written by the writer; writer plays the writer's
// turns (by its turn number), refute makes the lead's verify refute K1.
func synthesisRun(t *testing.T, refute bool, writer func(turn int) llmtest.Turn) (srv *llmtest.Server, code int, stdout, dir string) {
	t.Helper()
	home, work := t.TempDir(), t.TempDir()
	inputs := filepath.Join(work, "data")
	os.MkdirAll(inputs, 0o755)
	os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644)
	task := filepath.Join(work, "task.yaml")
	os.WriteFile(task, []byte("objective: Sum n and report it\ninputs: ./data\ndeliverables:\n  - path: /outputs/report.md\n    non_empty: true\n"), 0o644)
	var mu sync.Mutex
	lead, wturn := 0, 0
	srv = llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			return calls(call("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total is 42", "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			v := "supported"
			if refute {
				v = "refuted"
			}
			return calls(call("verdict", map[string]any{"verdict": v, "checks": []string{"awk"}}))
		case "writer":
			wturn++
			return writer(wturn)
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n " + leadSecret}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 2:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 3:
			return calls(call("verify", map[string]any{"claim": "the total is 42", "evidence": []string{"/inputs/data.csv"}}))
		case 4:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "ok", "refs": []string{"report:A1"}}), finish("done"))
		default:
			if strings.Contains(lastText(req), "a refuted claim is load-bearing: K1") {
				// Withdrawn, K1 no longer blocks finish; the writer may
				// still cite it, and its check fails.
				return calls(call("mark_claim", map[string]any{"claim": "K1", "mark": "withdrawn", "reason": "the verifier refuted it"}), finish("done"))
			}
			// After a request_evidence: cancel the writer's item, finish again.
			for _, it := range []string{"T2"} {
				if strings.Contains(lastText(req), "on the board as "+it) {
					return calls(call("board_cancel", map[string]any{"id": it, "reason": "the graph has it"}), finish("done"))
				}
			}
			return calls(finish("done"))
		}
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--task", task)
	code, stdout, stderr := cli(t, args...)
	if strings.Contains(stderr, "panic") {
		t.Fatal(stderr)
	}
	return srv, code, stdout, onlyRun(t, home)
}

func lastText(req llmtest.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

func writeReport(text string) func(int) llmtest.Turn {
	return func(turn int) llmtest.Turn {
		if turn == 1 {
			return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": text}))
		}
		return calls(finish("written"))
	}
}

// A writer request follows the lead's finish, holds the graph's claim ids
// but not the lead's messages, and its report's citations resolve.
func TestSynthesisWriterEndToEnd(t *testing.T) {
	srv, code, stdout, dir := synthesisRun(t, false, writeReport("# Total\n\nThe total is 42 [K1].\n"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	var wreqs []llmtest.Request
	for _, req := range srv.Requests() {
		if req.Header.Get(llm.HeaderRole) == "writer" {
			wreqs = append(wreqs, req)
		}
	}
	if len(wreqs) == 0 {
		t.Fatal("no writer request")
	}
	raw := string(wreqs[0].Raw)
	if !strings.Contains(raw, "[K1] the total is 42") || strings.Contains(raw, leadSecret) {
		t.Errorf("the writer's request should hold K1 and not the lead's history: %.600s", raw)
	}
	if !strings.Contains(raw, "/outputs/report.md") {
		t.Error("the writer's request does not name the report path")
	}
	var graph, check *record.Synthesis
	for _, s := range decodeAll[record.Synthesis](t, runtest.Events(t, dir), record.TypeSynthesis) {
		switch s.Phase {
		case record.SynthesisGraph:
			graph = &s
		case record.SynthesisCheck:
			check = &s
		}
	}
	if graph == nil || !strings.Contains(string(graph.Graph), `"K1"`) {
		t.Errorf("no graph with K1 in the synthesis events: %+v", graph)
	}
	if check == nil || check.Citations != 1 || len(check.Failures) != 0 {
		t.Errorf("synthesis check %+v; want 1 citation resolved, no failure", check)
	}
	if got := fileContent(t, filepath.Join(dir, "outputs", "report.md")); !strings.Contains(got, "[K1]") {
		t.Errorf("report: %q", got)
	}
	runtimeAgentsExported(t, dir) // the writer (and verifiers), each its own trajectory
	// The writer's citation makes K1 load-bearing in the ledger.
	home := filepath.Dir(filepath.Dir(dir))
	if k := ledgerOf(t, home, dir)["K1"]; !k.LoadBearing || !slices.Contains(k.Bears, "cited by /outputs/report.md") {
		t.Errorf("K1 %+v; want load-bearing, cited by /outputs/report.md", k)
	}
	proofreadTools(t, srv) // the lead's, the subagents', the verifier's and the writer's tools
}

// A refuted claim cited as support fails delivery with the line.
func TestSynthesisRefutedCitationFails(t *testing.T) {
	_, code, stdout, _ := synthesisRun(t, true, writeReport("# Total\n\nThe total is 42 [K1].\n"))
	if code == 0 {
		t.Fatal("exit 0; want failure")
	}
	s := decodeSummary(t, stdout)
	if !strings.Contains(strings.Join(s.Failures, "\n"), "/outputs/report.md:3 cites refuted claim K1") {
		t.Errorf("failures %q; want the line of the refuted citation", s.Failures)
	}
}

// A writer's request_evidence puts a new item on the board and the lead
// gets the next request; the writer runs again at the next finish.
func TestSynthesisRequestEvidence(t *testing.T) {
	runs := 0
	srv, code, stdout, dir := synthesisRun(t, false, func(turn int) llmtest.Turn {
		if turn == 1 {
			runs++
			return calls(call("request_evidence", map[string]any{"claim": "K1", "reason": "the source of the column is not in the graph"}))
		}
		return writeReport("The total is 42 [K1].\n")(turn - 1)
	})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	var adds []board.Event
	for _, b := range decodeAll[board.Event](t, runtest.Events(t, dir), record.TypeBoard) {
		if b.Op == board.OpAdd && b.By == "W1" {
			adds = append(adds, b)
		}
	}
	if len(adds) != 1 || adds[0].ID != "T2" {
		t.Errorf("writer's board items %+v; want T2", adds)
	}
	reqs := srv.Requests()
	for i, req := range reqs {
		if req.Header.Get(llm.HeaderRole) == "writer" && strings.Contains(string(req.Raw), "request_evidence") && i+1 < len(reqs) {
			if reqs[i+1].Header.Get(llm.HeaderRole) != llm.CallerLead || !strings.Contains(lastText(reqs[i+1]), "T2") {
				t.Errorf("the request after the writer's request_evidence is %s, want the lead's with T2", reqs[i+1].Header.Get(llm.HeaderRole))
			}
			break
		}
	}
}

// The lead writes the report itself, citing the subagent's claim: the
// writer's first request holds that report as it is (to revise, not to
// replace), the exact text of the evidence the claim cites, and search
// and fetch; its claim_outputs says the file exists; the graph event
// records that it existed.
func TestSynthesisRevisesTheLeadsReport(t *testing.T) {
	const leadText = "# Total\n\nThe total of n is 42 [K1]. LEAD-WROTE-THIS-3317\n"
	home, work := t.TempDir(), t.TempDir()
	inputs := filepath.Join(work, "data")
	os.MkdirAll(inputs, 0o755)
	os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644)
	task := filepath.Join(work, "task.yaml")
	os.WriteFile(task, []byte("objective: Sum n and report it\ninputs: ./data\ndeliverables:\n  - path: /outputs/report.md\n    non_empty: true\n"), 0o644)
	var mu sync.Mutex
	lead, sub, wturn := 0, 0, 0
	var claimOut string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			sub++
			if sub == 1 {
				return calls(call("read_file", map[string]any{"path": "/inputs/data.csv"}))
			}
			return calls(call("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total of n is 42", "evidence": []string{"E1"}}}}))
		case llm.CallerVerifier:
			return calls(call("verdict", map[string]any{"verdict": "supported", "checks": []string{"awk"}}))
		case "writer":
			wturn++
			switch wturn {
			case 1:
				return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}))
			case 2:
				claimOut = toolResult(req, "claim_outputs")
				return calls(call("edit_file", map[string]any{"path": "/outputs/report.md", "old_text": "LEAD-WROTE-THIS-3317", "new_text": "(from E1)"}))
			}
			return calls(finish("revised the lead's report: kept its text, replaced a marker"))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n"}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 2:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 3:
			return calls(call("verify", map[string]any{"claim": "K1"}),
				call("board_resolve", map[string]any{"id": "T1", "note": "verified", "refs": []string{"report:A1"}}),
				call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": leadText}))
		}
		return calls(finish("done"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--task", task)
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var first *llmtest.Request
	for _, req := range srv.Requests() {
		if req.Header.Get(llm.HeaderRole) == "writer" {
			first = &req
			break
		}
	}
	if first == nil {
		t.Fatal("no writer request")
	}
	task0 := firstUser(*first)
	for _, want := range []string{"/outputs/report.md exists", "LEAD-WROTE-THIS-3317", "### E1", "/inputs/data.csv lines 1-3", "n\n40\n2"} {
		if !strings.Contains(task0, want) {
			t.Errorf("the writer's first request lacks %q:\n%s", want, task0)
		}
	}
	var names []string
	for _, tl := range first.Tools {
		names = append(names, tl.Name)
	}
	// Read-only evidence tools that can work here: read_file and grep (this
	// run has neither a corpus nor a network, so fetch and search are not
	// offered, and the writer's task does not mention them).
	for _, want := range []string{"read_file", "grep"} {
		if !slices.Contains(names, want) {
			t.Errorf("the writer's tools %v lack %s", names, want)
		}
	}
	if slices.Contains(names, "fetch") || strings.Contains(task0, "fetch") {
		t.Errorf("fetch offered or named without a corpus or network: tools %v", names)
	}
	mu.Lock()
	if !strings.Contains(claimOut, "exists") || strings.Contains(claimOut, "does not exist yet") {
		t.Errorf("the writer's claim_outputs: %q; want that the file exists", claimOut)
	}
	mu.Unlock()
	dir := onlyRun(t, home)
	for _, s := range decodeAll[record.Synthesis](t, runtest.Events(t, dir), record.TypeSynthesis) {
		if s.Phase == record.SynthesisGraph && s.Existing["/outputs/report.md"] == "" {
			t.Errorf("the graph event does not record the existing report: %+v", s.Existing)
		}
	}
	if got := fileContent(t, filepath.Join(dir, "outputs", "report.md")); got != "# Total\n\nThe total of n is 42 [K1]. (from E1)\n" {
		t.Errorf("report %q: want the lead's, revised", got)
	}
}
