package main

import (
	"os"
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

// alignTask is a task whose answer must quote two input files, each cited
// clause by clause; it returns the task file.
func alignTask(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	inputs := filepath.Join(work, "data")
	os.MkdirAll(inputs, 0o755)
	os.WriteFile(filepath.Join(inputs, "deed.txt"), []byte("The tower was first lit on 14 March 1871.\n"), 0o644)
	os.WriteFile(filepath.Join(inputs, "log.txt"), []byte("Keeper Elias Marrow tended it for thirty years.\n"), 0o644)
	task := filepath.Join(work, "task.yaml")
	os.WriteFile(task, []byte(`objective: When was the tower first lit, and who kept it? Answer in /outputs/answer.md, quoting and citing.
inputs: ./data
deliverables:
  - path: /outputs/answer.md
    non_empty: true
verify:
  - kind: source_alignment
    name: quotes are in their sources
    files: [/outputs/answer.md]
    min_citations: 2
`), 0o644)
	return task
}

// evidenceIDs reads the ids read_file gave the two inputs from a request.
func evidenceIDs(req llmtest.Request) (deed, log string) {
	re := regexp.MustCompile(`\[evidence (E[0-9]+): /inputs/(deed|log)\.txt`)
	for _, m := range req.Messages {
		for _, f := range re.FindAllStringSubmatch(m.Content, -1) {
			if f[2] == "deed" {
				deed = f[1]
			} else {
				log = f[1]
			}
		}
	}
	return deed, log
}

// A single agent checks its answer before finishing: check_deliverables
// names the misattributed quote with its file:line and the rule; the
// repaired answer, cited clause by clause ("A" [E1], and "B" [E2]),
// passes, and so does the run.
func TestCheckDeliverablesBeforeFinish(t *testing.T) {
	home, task := t.TempDir(), alignTask(t)
	var mu sync.Mutex
	var checks []string
	var logID string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		deed, log := evidenceIDs(req)
		logID = log
		switch n {
		case 0:
			return calls(call("read_file", map[string]any{"path": "/inputs/deed.txt"}), call("read_file", map[string]any{"path": "/inputs/log.txt"}))
		case 1: // both quotes cited by the log's id: the first is misattributed
			return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/answer.md"}}),
				call("write_file", map[string]any{"path": "/outputs/answer.md", "content": "# Answer\n\nIt was \"first lit on 14 March 1871\" [" + log + "], and \"Keeper Elias Marrow\" kept it [" + log + "].\n"}),
				call("check_deliverables", map[string]any{}))
		case 2:
			checks = append(checks, toolResult(req, "check_deliverables"))
			return calls(call("write_file", map[string]any{"path": "/outputs/answer.md", "content": "# Answer\n\nIt was \"first lit on 14 March 1871\" [" + deed + "], and \"Keeper Elias Marrow\" kept it [" + log + "].\n"}),
				call("check_deliverables", map[string]any{}))
		case 3:
			checks = append(checks, toolResult(req, "check_deliverables"))
		}
		return calls(finish("answered"))
	})
	code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--sandbox", "none", "--json", "--task", task)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(checks) != 2 {
		t.Fatalf("check_deliverables results %q", checks)
	}
	for _, want := range []string{"1 failure(s)", `/outputs/answer.md:3: ` + logID + ` "first lit on 14 March 1871": rule "a quote is in the evidence its citation names" failed`, "attributed to [" + logID + "]"} {
		if !strings.Contains(checks[0], want) {
			t.Errorf("first check lacks %q:\n%s", want, checks[0])
		}
	}
	if !strings.Contains(checks[1], "cheap checks pass") {
		t.Errorf("second check: %q", checks[1])
	}
	var pcs []record.Precheck
	pcs = decodeAll[record.Precheck](t, runtest.Events(t, onlyRun(t, home)), record.TypePrecheck)
	if len(pcs) != 2 || pcs[0].Trigger != record.PrecheckTool || len(pcs[0].Failures) != 1 || len(pcs[1].Failures) != 0 {
		t.Errorf("precheck events %+v", pcs)
	}
}

// A finish whose deliverables would fail the final gate is refused once
// with the failures: the agent's repair turn. Repaired, the run
// completes; a second failing finish would go to the final gate.
func TestFinishGivesOneRepairTurn(t *testing.T) {
	for _, repair := range []bool{true, false} {
		t.Run(map[bool]string{true: "repaired", false: "not repaired"}[repair], func(t *testing.T) {
			home, task := t.TempDir(), alignTask(t)
			var mu sync.Mutex
			var refusal, deedID string
			srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
				mu.Lock()
				defer mu.Unlock()
				deed, log := evidenceIDs(req)
				deedID = deed
				switch n {
				case 0:
					return calls(call("read_file", map[string]any{"path": "/inputs/deed.txt"}), call("read_file", map[string]any{"path": "/inputs/log.txt"}))
				case 1:
					return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/answer.md"}}),
						call("write_file", map[string]any{"path": "/outputs/answer.md", "content": "# Answer\n\nIt was \"first lit in 1870\" [" + deed + "], and \"Keeper Elias Marrow\" kept it [" + log + "].\n"}),
						finish("answered"))
				case 2:
					refusal = toolResult(req, "finish")
					if repair {
						return calls(call("edit_file", map[string]any{"path": "/outputs/answer.md", "old_text": "first lit in 1870", "new_text": "first lit on 14 March 1871"}), finish("answered"))
					}
				}
				return calls(finish("answered"))
			})
			code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--sandbox", "none", "--json", "--task", task)...)
			if want := map[bool]int{true: 0, false: 1}[repair]; code != want {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, want, stdout, stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, want := range []string{"finish refused: the final gate would fail", `/outputs/answer.md:3: ` + deedID + ` "first lit in 1870"`, "one repair turn"} {
				if !strings.Contains(refusal, want) {
					t.Errorf("the refusal lacks %q:\n%s", want, refusal)
				}
			}
			if n := len(srv.Requests()); n != 3 {
				t.Errorf("%d model requests; want 3 (work, the refused finish, the repair turn)", n)
			}
			pcs := decodeAll[record.Precheck](t, runtest.Events(t, onlyRun(t, home)), record.TypePrecheck)
			if len(pcs) != 1 || !pcs[0].Refused || pcs[0].Trigger != record.PrecheckFinish {
				t.Errorf("precheck events %+v; want the one refused finish", pcs)
			}
		})
	}
}

// In a team, the lead's check_deliverables also checks the report's [K3]
// citations against the claim ledger.
func TestCheckDeliverablesTeamClaimCitations(t *testing.T) {
	home, inputs := t.TempDir(), sumInputs(t)
	var mu sync.Mutex
	lead := 0
	var check string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			return calls(call("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total is 45", "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			return calls(call("verdict", map[string]any{"verdict": "refuted", "repair": "the total is 42", "checks": []string{"awk"}}))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n"}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 2:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 3:
			return calls(call("verify", map[string]any{"claim": "K1"}), call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": "# Total\n\nThe total is 45 [K1], see also [K7].\n"}))
		case 4:
			return calls(call("check_deliverables", map[string]any{}))
		case 5:
			check = toolResult(req, "check_deliverables")
			return calls(call("board_cancel", map[string]any{"id": "T1", "reason": "done here"}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": "# Total\n\nThe total is 42.\n"}))
		}
		return calls(finish("the total is 42"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--synthesis", "off", "--inputs", inputs, "Sum n")
	if code, stdout, stderr := cli(t, args...); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"/outputs/report.md:3: cites refuted claim K1", "/outputs/report.md:3: cites K7, which is no claim of the ledger"} {
		if !strings.Contains(check, want) {
			t.Errorf("check_deliverables lacks %q:\n%s", want, check)
		}
	}
}
