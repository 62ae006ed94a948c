package main

import (
	"encoding/json"
	"github.com/apodex/apodex/internal/runtest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
)

// firstUser is a request's task message.
func firstUser(req llmtest.Request) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// Two subagents report conflicting sums that a third item rests on: the
// claims are load-bearing and disputed, the lead's finish triggers an
// effort wave whose investigators carry distinct framings, a focused
// verifier settles each claim, the lead hears the outcome and finishes,
// and `apodex claims RUN --json` shows the final statuses.
func TestEffortWaveEndToEnd(t *testing.T) {
	home, inputs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lead := 0
	framingsOf := map[string][]string{} // claim text -> investigator framings
	var leadAfterWave string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		task := firstUser(req)
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			sum := "45"
			if req.Header.Get(llm.HeaderAgent) == "A2" {
				sum = "42"
			}
			return calls(call("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total is " + sum, "evidence": []string{"/inputs/data.csv"}}}}))
		case "investigator":
			claim := strings.SplitN(strings.SplitN(task, ":\n", 2)[1], "\n", 2)[0]
			_, framing, _ := strings.Cut(task, "Your framing: ")
			framing, _, _ = strings.Cut(framing, ":")
			framingsOf[claim] = append(framingsOf[claim], framing)
			return calls(call("report", map[string]any{"summary": "recomputed: 42", "claims": []map[string]any{{"text": "the total is 42", "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			v := map[string]any{"verdict": "supported", "checks": []string{"awk sum: 42"}}
			if strings.Contains(task, "the total is 45") {
				v = map[string]any{"verdict": "refuted", "location": "/inputs/data.csv", "repair": "the total is 42", "checks": []string{"awk sum: 42"}}
			}
			if !strings.Contains(task, "Focus:") {
				t.Errorf("the wave's verifier has no focus: %q", task)
			}
			return calls(call("verdict", v))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum A", "objective": "sum n"}),
				call("board_add", map[string]any{"title": "sum B", "objective": "sum n again"}),
				call("board_add", map[string]any{"title": "total", "objective": "report the total", "deps": []string{"T1", "T2"}}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}),
				call("dispatch", map[string]any{"item": "T2", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 2, 3:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 4:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "reported", "refs": []string{"report:A1"}}),
				call("board_resolve", map[string]any{"id": "T2", "note": "reported", "refs": []string{"report:A2"}}),
				call("board_resolve", map[string]any{"id": "T3", "note": "the total is 42"}),
				finish("the total is 42"))
		default:
			for _, m := range req.Messages {
				if strings.Contains(m.Content, "Effort wave 1") {
					leadAfterWave = m.Content
				}
			}
			return calls(finish("the total is 42"))
		}
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--inputs", inputs, "Sum n")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	dir := onlyRun(t, home)

	mu.Lock()
	for _, claim := range []string{"the total is 45", "the total is 42"} {
		fs := framingsOf[claim]
		if len(fs) != 2 || fs[0] == fs[1] {
			t.Errorf("investigators of %q had framings %q; want 2 distinct", claim, fs)
		}
	}
	if !strings.Contains(leadAfterWave, "is now refuted") || !strings.Contains(leadAfterWave, "is now corroborated") || !strings.Contains(leadAfterWave, "reopen T1") {
		t.Errorf("the lead's observation after the wave: %q", leadAfterWave)
	}
	mu.Unlock()

	efforts := decodeAll[record.Effort](t, runtest.Events(t, dir), record.TypeEffort)
	var waves, inv int
	for _, e := range efforts {
		switch e.Phase {
		case record.EffortWave:
			waves++
		case record.EffortInvestigator:
			inv++
			if e.Framing == "" || e.State != "reported" || e.Turns != 1 {
				t.Errorf("investigator event %+v", e)
			}
		}
	}
	if waves != 1 || inv != 4 {
		t.Errorf("effort events: %d waves, %d investigators; want 1 wave (the claims were settled), 4 investigators", waves, inv)
	}

	code, out, errOut := cli(t, "claims", "--home", home, "--json", filepath.Base(dir))
	if code != 0 {
		t.Fatalf("claims: exit %d: %s", code, errOut)
	}
	var g struct{ Claims []claims.Claim }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A1": claims.Refuted, "A2": claims.Corroborated} // 45 and 42
	for _, k := range g.Claims {
		if w, ok := want[k.StatedBy]; ok && (k.Status != w || !k.LoadBearing) {
			t.Errorf("%s: %s load-bearing=%v (%s); want %s, load-bearing", k.ID, k.Status, k.LoadBearing, k.Why, w)
		}
	}
	if len(g.Claims) != 6 {
		t.Errorf("claims: %d; want 2 reported and 4 from investigators", len(g.Claims))
	}
	proofreadTools(t, srv) // the investigators' and the verifier's tools too
}

// A second wave goes only to the claim still unsettled (the settled one is
// never re-investigated), and after --effort-waves waves finish is taken.
func TestEffortLaterWavesOnlyUnsettled(t *testing.T) {
	home, inputs := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644)
	var mu sync.Mutex
	lead := 0
	investigated := map[string]int{} // claim text -> investigators
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		task := firstUser(req)
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			text := "the total is 45"
			if req.Header.Get(llm.HeaderAgent) == "A2" {
				text = "the mean is 21"
			}
			return calls(call("report", map[string]any{"summary": "done", "claims": []map[string]any{{"text": text, "evidence": []string{"/inputs/data.csv"}}}}))
		case "investigator":
			for _, c := range []string{"the total is 45", "the mean is 21"} {
				if strings.Contains(task, c) {
					investigated[c]++
				}
			}
			return calls(call("report", map[string]any{"summary": "could not tell"}))
		case llm.CallerVerifier:
			if strings.Contains(task, "the total is 45") {
				return calls(call("verdict", map[string]any{"verdict": "refuted", "checks": []string{"awk"}}))
			}
			return calls(call("verdict", map[string]any{"verdict": "insufficient", "checks": []string{"read"}}))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n"}),
				call("board_add", map[string]any{"title": "mean", "objective": "mean of n"}),
				call("board_add", map[string]any{"title": "report", "objective": "report", "deps": []string{"T1", "T2"}}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum.", "tools": []string{"read_file"}}),
				call("dispatch", map[string]any{"item": "T2", "role": "averager", "instructions": "Mean.", "tools": []string{"read_file"}}))
		case 2, 3:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 4:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "ok"}), call("board_resolve", map[string]any{"id": "T2", "note": "ok"}),
				call("board_resolve", map[string]any{"id": "T3", "note": "ok"}), finish("done"))
		}
		return calls(finish("done"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--inputs", inputs, "--effort-width", "1", "Sum and mean")
	if code, stdout, stderr := cli(t, args...); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var waves [][]string
	for _, e := range decodeAll[record.Effort](t, runtest.Events(t, onlyRun(t, home)), record.TypeEffort) {
		if e.Phase == record.EffortWave {
			waves = append(waves, e.Claims)
		}
	}
	if len(waves) != 2 || len(waves[0]) != 2 || len(waves[1]) != 1 {
		t.Fatalf("waves %v; want two: both claims, then only the unsettled one", waves)
	}
	mu.Lock()
	defer mu.Unlock()
	if investigated["the total is 45"] != 1 || investigated["the mean is 21"] != 2 {
		t.Errorf("investigators per claim %v; want the refuted one once, the unsettled one in both waves", investigated)
	}
}
