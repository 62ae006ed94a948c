package crashtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
)

// TestSettingsSurviveKill is issue #24's check from outside: a team run
// started with --effort adaptive --synthesis on --verify-max-turns 3 is
// killed (SIGKILL) during its lead's first model call and resumed; the
// resumed process runs with those settings, read back from the record: an
// effort wave investigates the disputed claims, the writer writes the
// report, and a verifier that never gives a verdict gets 3 model calls
// (the default is 6). The finished run then replays identical.
func TestSettingsSurviveKill(t *testing.T) {
	needApodex(t)
	base := t.TempDir()
	inputs := filepath.Join(base, "task", "data")
	mustWrite(t, filepath.Join(inputs, "data.csv"), "n\n40\n2\n")
	task := filepath.Join(base, "task", "task.yaml")
	mustWrite(t, task, "objective: Sum n and report the total\ninputs: ./data\ndeliverables:\n  - path: /outputs/report.md\n    non_empty: true\n")

	var mu sync.Mutex
	killed := false
	inFlight := make(chan struct{}, 1)
	stalls := 0 // model calls of the verifier that never gives a verdict, after the kill
	roles := map[string]int{}
	kid := regexp.MustCompile(`\[(K[0-9]+)\] the total is 42`)
	refuted := regexp.MustCompile(`(K[0-9]+) "the total is 45"[^\n]*is refuted`)
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		role, task := req.Header.Get(llm.HeaderRole), firstUser(req)
		if !killed {
			if role == llm.CallerLead {
				select {
				case inFlight <- struct{}{}:
				default:
				}
			}
			return llmtest.Turn{Hang: true} // the kill comes during this call
		}
		roles[role]++
		switch role {
		case llm.CallerSubagent:
			sum := "45"
			if req.Header.Get(llm.HeaderAgent) == "A2" {
				sum = "42"
			}
			return reply(toolCall("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total is " + sum, "evidence": []string{"/inputs/data.csv"}}}}))
		case "investigator":
			return reply(toolCall("report", map[string]any{"summary": "recomputed: 42", "claims": []map[string]any{{"text": "the total is 42", "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			if strings.Contains(task, "the mean is 21") {
				stalls++
				return reply(toolCall("list_files", map[string]any{"path": "/inputs"}))
			}
			v := map[string]any{"verdict": "supported", "checks": []string{"awk sum: 42"}}
			if strings.Contains(task, "the total is 45") {
				v = map[string]any{"verdict": "refuted", "location": "/inputs/data.csv", "repair": "the total is 42", "checks": []string{"awk sum: 42"}}
			}
			return reply(toolCall("verdict", v))
		case "writer":
			m := kid.FindStringSubmatch(string(req.Raw))
			if m == nil || assistantTurns(req) > 0 {
				return reply(toolCall("finish", map[string]any{"summary": "written"}))
			}
			return reply(toolCall("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}),
				toolCall("write_file", map[string]any{"path": "/outputs/report.md", "content": "# Total\n\nThe total is 42 [" + m[1] + "].\n"}))
		}
		switch assistantTurns(req) {
		case 0:
			return reply(toolCall("board_add", map[string]any{"title": "sum A", "objective": "sum n"}),
				toolCall("board_add", map[string]any{"title": "sum B", "objective": "sum n again"}),
				toolCall("board_add", map[string]any{"title": "total", "objective": "report the total", "deps": []string{"T1", "T2"}}),
				toolCall("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}),
				toolCall("dispatch", map[string]any{"item": "T2", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 1, 2:
			return reply(toolCall("wait", map[string]any{"timeout_s": 5}))
		case 3:
			return reply(toolCall("verify", map[string]any{"claim": "the mean is 21", "evidence": []string{"/inputs/data.csv"}}))
		case 4:
			return reply(toolCall("board_resolve", map[string]any{"id": "T1", "note": "reported", "refs": []string{"report:A1"}}),
				toolCall("board_resolve", map[string]any{"id": "T2", "note": "reported", "refs": []string{"report:A2"}}),
				toolCall("board_resolve", map[string]any{"id": "T3", "note": "the total is 42"}),
				toolCall("finish", map[string]any{"summary": "the total is 42"}))
		}
		// A refuted load-bearing claim blocks finish: the lead withdraws
		// A1's wrong total (the board's total rests on A2's).
		for _, m := range req.Messages {
			if k := refuted.FindStringSubmatch(m.Content); k != nil && !called(req, "mark_claim") {
				return reply(toolCall("mark_claim", map[string]any{"claim": k[1], "mark": "withdrawn", "reason": "A1 summed wrong; the total rests on A2's 42"}),
					toolCall("finish", map[string]any{"summary": "the total is 42"}))
			}
		}
		return reply(toolCall("finish", map[string]any{"summary": "the total is 42"}))
	})

	home := filepath.Join(base, "home")
	model := []string{"--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m"}
	c := startChild(t, append([]string{"run", "--task", task, "--mode", "team", "--quiet",
		"--effort", "adaptive", "--synthesis", "on", "--verify-max-turns", "3"}, model...)...)
	select {
	case <-inFlight:
	case <-c.done:
		t.Fatalf("the run ended before its lead's first model call: %s", c.output())
	case <-time.After(60 * time.Second):
		t.Fatal("the lead's first model call did not come")
	}
	runDir := findRun(home)
	// The call is in flight once its request is recorded.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(readFile(t, filepath.Join(runDir, record.EventsFile)), `"type":"model_request"`); {
		if time.Now().After(deadline) {
			t.Fatal("the lead's model request was not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.kill()
	mu.Lock()
	killed = true
	mu.Unlock()

	r := startChild(t, append([]string{"resume", filepath.Base(runDir), "--quiet", "--json"}, model[:2]...)...)
	select {
	case <-r.done:
	case <-time.After(120 * time.Second):
		t.Fatal("resume did not end")
	}
	if code := r.exitCode(); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, r.output())
	}

	events := readEvents(t, runDir)
	var started record.RunStarted
	if err := events[0].Decode(&started); err != nil || started.Settings == nil {
		t.Fatalf("run_started: %v", err)
	}
	if tm := started.Settings.Team; tm.Effort != "adaptive" || tm.Synthesis != "on" || tm.VerifyMaxTurns != 3 {
		t.Fatalf("run_started records team settings %+v", tm)
	}
	resumedAt := -1
	for i, e := range events {
		if e.Type == record.TypeResumed {
			resumedAt = i
		}
	}
	if resumedAt < 0 {
		t.Fatal("no resumed event")
	}
	waves, investigators, synthesis := 0, 0, 0
	for _, e := range events[resumedAt:] {
		switch e.Type {
		case record.TypeEffort:
			var ef record.Effort
			e.Decode(&ef)
			switch ef.Phase {
			case record.EffortWave:
				waves++
			case record.EffortInvestigator:
				investigators++
			}
		case record.TypeSynthesis:
			synthesis++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if waves == 0 || investigators == 0 {
		t.Errorf("the resumed segment ran no effort wave (%d waves, %d investigators)", waves, investigators)
	}
	if synthesis == 0 || roles["writer"] == 0 {
		t.Errorf("the resumed segment ran no synthesis (%d synthesis events, %d writer requests)", synthesis, roles["writer"])
	}
	if stalls != 3 {
		t.Errorf("the verifier without a verdict made %d model calls; --verify-max-turns 3 allows 3", stalls)
	}
	if report := readFile(t, filepath.Join(runDir, "outputs", "report.md")); !strings.Contains(report, "The total is 42 [K") {
		t.Errorf("the writer's report: %q", report)
	}

	p := startChild(t, "replay", "--home", home, filepath.Base(runDir))
	select {
	case <-p.done:
	case <-time.After(120 * time.Second):
		t.Fatal("replay did not end")
	}
	if code, out := p.exitCode(), p.output(); code != 0 || !strings.HasPrefix(out, "identical\n") {
		t.Errorf("replay of the resumed run: exit %d: %s", code, out)
	}
}

// firstUser is a request's first user message (a subagent's task).
func firstUser(req llmtest.Request) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// assistantTurns counts the assistant messages a request holds: the
// agent's turn, the same before a kill and after the resume.
func assistantTurns(req llmtest.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

func toolCall(name string, args map[string]any) llm.ToolCall {
	b, _ := json.Marshal(args)
	return llm.ToolCall{Name: name, Arguments: string(b)}
}

func reply(calls ...llm.ToolCall) llmtest.Turn { return llmtest.Turn{Calls: calls} }

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func readEvents(t *testing.T, dir string) []record.Event {
	t.Helper()
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c.Events
}

// called reports whether the agent behind req called tool name before.
func called(req llmtest.Request, name string) bool {
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}
