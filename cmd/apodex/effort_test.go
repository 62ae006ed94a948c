package main

import (
	"encoding/json"
	"fmt"
	"github.com/apodex/apodex/internal/runtest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
)

// refutedClaim finds the claim a refused finish names.
var refutedClaim = regexp.MustCompile(`a refuted claim is load-bearing: (K[0-9]+)`)

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
	var leadAfterWave, refusal string
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
		case 5:
			for _, m := range req.Messages {
				if strings.Contains(m.Content, "Effort wave 1") {
					leadAfterWave = m.Content
				}
			}
			return calls(finish("the total is 42"))
		case 6:
			// The refuted claim still bears on the answer: finish is refused.
			refusal = lastText(req)
			id := "K?"
			if m := refutedClaim.FindStringSubmatch(refusal); m != nil {
				id = m[1]
			}
			return calls(call("mark_claim", map[string]any{"claim": id, "mark": "withdrawn", "reason": "A1 miscounted; the total rests on A2's claim"}),
				finish("the total is 42"))
		default:
			return calls(finish("the total is 42"))
		}
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--inputs", inputs, "Sum n")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	dir := onlyRun(t, home)
	runtimeAgentsExported(t, dir) // investigators and verifiers, each its own trajectory

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
	if m := refutedClaim.FindStringSubmatch(refusal); m == nil || !strings.Contains(refusal, m[1]+` "the total is 45" (by A1 on T1)`) ||
		!strings.Contains(refusal, "reopen T1") || !strings.Contains(refusal, "withdraw "+m[1]) {
		t.Errorf("the lead's finish after the wave was not refused for K1 with both ways out: %q", refusal)
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
	for _, k := range g.Claims {
		switch k.StatedBy {
		case "A1": // 45: refuted, then withdrawn by the lead
			if k.Status != claims.Refuted || k.LoadBearing || !strings.Contains(k.Withdrawn, "A1 miscounted") {
				t.Errorf("%s: %s load-bearing=%v withdrawn=%q; want refuted, withdrawn", k.ID, k.Status, k.LoadBearing, k.Withdrawn)
			}
		case "A2": // 42
			if k.Status != claims.Corroborated || !k.Settled || !k.LoadBearing {
				t.Errorf("%s: %s settled=%v load-bearing=%v (%s); want corroborated, settled, load-bearing", k.ID, k.Status, k.Settled, k.LoadBearing, k.Why)
			}
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
		if m := refutedClaim.FindStringSubmatch(lastText(req)); m != nil {
			return calls(call("mark_claim", map[string]any{"claim": m[1], "mark": "withdrawn", "reason": "the sum is not reported"}), finish("done"))
		}
		return calls(finish("done"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--inputs", inputs, "--effort-width", "1", "--effort-budget", "0", "Sum and mean")
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
		t.Fatalf("waves %v; want two: both claims, then only the unsettled one; effort events %+v", waves, decodeAll[record.Effort](t, runtest.Events(t, onlyRun(t, home)), record.TypeEffort))
	}
	mu.Lock()
	defer mu.Unlock()
	if investigated["the total is 45"] != 1 || investigated["the mean is 21"] != 2 {
		t.Errorf("investigators per claim %v; want the refuted one once, the unsettled one in both waves", investigated)
	}
	// Wave 2 took a framing wave 1 had not used for that claim.
	used := map[string][]string{}
	for _, e := range decodeAll[record.Effort](t, runtest.Events(t, onlyRun(t, home)), record.TypeEffort) {
		if e.Phase == record.EffortInvestigator {
			if slices.Contains(used[e.Claim], e.Framing) {
				t.Errorf("%s was investigated twice with the framing %q", e.Claim, e.Framing)
			}
			used[e.Claim] = append(used[e.Claim], e.Framing)
		}
	}
}

// effortRun plays a team whose subagents report the given claims (one
// each, on items T1…, all under a final item) that no verifier can
// settle, and whose lead finishes as soon as it may; extra are more run
// flags. It returns the run directory.
func effortRun(t *testing.T, url func(*llmtest.Server) string, texts []string, extra ...string) (dir string, reqs func() []llmtest.Request) {
	t.Helper()
	home, inputs := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644)
	var mu sync.Mutex
	lead := 0
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			var i int
			fmt.Sscanf(req.Header.Get(llm.HeaderAgent), "A%d", &i)
			return calls(call("report", map[string]any{"summary": "done", "claims": []map[string]any{{"text": texts[i-1], "evidence": []string{"/inputs/data.csv"}}}}))
		case "investigator":
			return calls(call("report", map[string]any{"summary": "could not tell"}))
		case llm.CallerVerifier:
			return calls(call("verdict", map[string]any{"verdict": "insufficient", "checks": []string{"read"}}))
		}
		all := lastText(req)
		ended := 0
		for i := range texts {
			if strings.Contains(all, fmt.Sprintf("Assignment A%d (finder) on T%d ended", i+1, i+1)) {
				ended++
			}
		}
		if lead >= 2 && lead < 3 && ended < len(texts) {
			return calls(call("wait", map[string]any{"timeout_s": 5})) // until every report is in
		}
		lead++
		switch lead {
		case 1:
			var cs []llm.ToolCall
			var deps []string
			for i := range texts {
				id := fmt.Sprintf("T%d", i+1)
				deps = append(deps, id)
				cs = append(cs, call("board_add", map[string]any{"title": id, "objective": "find it"}),
					call("dispatch", map[string]any{"item": id, "role": "finder", "instructions": "Find it.", "tools": []string{"read_file"}}))
			}
			return calls(append(cs, call("board_add", map[string]any{"title": "answer", "objective": "answer", "deps": deps}))...)
		case 2:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 3:
			var cs []llm.ToolCall
			for i := range texts {
				cs = append(cs, call("board_resolve", map[string]any{"id": fmt.Sprintf("T%d", i+1), "note": "ok"}))
			}
			cs = append(cs, call("board_resolve", map[string]any{"id": fmt.Sprintf("T%d", len(texts)+1), "note": "ok"}))
			return calls(append(cs, finish("done"))...)
		}
		if strings.Contains(lastText(req), "not done yet") {
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		}
		return calls(finish("done"))
	})
	args := append([]string{"run", "--home", home, "--provider", "openai", "--base-url", url(srv), "--model", "m"},
		"--mode", "team", "--sandbox", "none", "--json", "--synthesis", "off", "--inputs", inputs)
	args = append(append(args, extra...), "Find them")
	if code, stdout, stderr := cli(t, args...); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	return onlyRun(t, home), srv.Requests
}

// The investigators of one wave run at once (the endpoint holds each
// until both are in flight), and the wave names its claims and why.
func TestEffortInvestigatorsRunAtOnce(t *testing.T) {
	var met func() bool
	dir, _ := effortRun(t, func(srv *llmtest.Server) string {
		url, m := meet(t, srv, "investigator", 2)
		met = m
		return url
	}, []string{"the total is 42"}, "--effort-waves", "1", "--effort-budget", "0", "--concurrency", "4")
	if !met() {
		t.Fatal("the wave's two investigators never ran at once")
	}
	var wave *record.Effort
	framings := map[string]bool{}
	for _, e := range decodeAll[record.Effort](t, runtest.Events(t, dir), record.TypeEffort) {
		switch e.Phase {
		case record.EffortWave:
			wave = &e
		case record.EffortInvestigator:
			framings[e.Framing] = true
		}
	}
	if wave == nil || !slices.Equal(wave.Claims, []string{"K1"}) || wave.Reasons["K1"] != "unresolved" {
		t.Errorf("wave event %+v; want K1, unresolved", wave)
	}
	if len(framings) != 2 {
		t.Errorf("framings %v; want two distinct", framings)
	}
}

// Effort has a budget: a share of the run's tokens so far. Once effort's
// agents have spent it, no further wave starts; a budget event says so,
// naming the claims left and why, and finish goes through.
func TestEffortBudget(t *testing.T) {
	dir, reqs := effortRun(t, func(srv *llmtest.Server) string { return srv.URL }, []string{"the total is 42", "the mean is 21"})
	var phases []string
	var budget *record.Effort
	for _, e := range decodeAll[record.Effort](t, runtest.Events(t, dir), record.TypeEffort) {
		phases = append(phases, e.Phase)
		if e.Phase == record.EffortBudget {
			budget = &e
		}
	}
	if budget == nil || budget.Wave != 2 || budget.BudgetTokens == 0 || budget.SpentTokens < budget.BudgetTokens || len(budget.Claims) != 2 ||
		budget.Reasons["K1"] != "insufficient" || budget.RunTokens*25/100 != budget.BudgetTokens {
		t.Fatalf("effort phases %v, budget event %+v; want wave 1, then a budget event for wave 2 (25%% of the run's tokens spent)", phases, budget)
	}
	// Each agent of the wave was given an equal share of the budget: one
	// call each (the fake's calls cost more than a share).
	inv := 0
	for _, r := range reqs() {
		if r.Header.Get(llm.HeaderRole) == "investigator" {
			inv++
		}
	}
	if inv != 4 {
		t.Errorf("investigator requests %d; want 4 (two claims, two framings, one wave)", inv)
	}
}

// hasToolResult reports whether a request already holds a tool result (the
// agent's second turn or later).
func hasToolResult(req llmtest.Request) bool {
	for _, m := range req.Messages {
		if m.Role == "tool" {
			return true
		}
	}
	return false
}

// Issue #25: a team run whose lead verifies two claims at once and whose
// finish starts an effort wave (investigators, then focused verifiers, all
// started by the runtime), every agent listing its inputs with ls -l, stat
// and ls -li in the sandbox, replays identical: the verifiers get their
// recorded loops whatever order they start in, and the file times and
// inode numbers of the replay's fresh inputs are reported as
// nondeterministic output, not divergences.
func TestReplayOfAnEffortWave(t *testing.T) {
	runtest.NeedSandbox(t)
	home, inputs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	look := bash("ls -l /inputs; stat /inputs/data.csv; ls -li /inputs; ls -l --full-time /inputs")
	var mu sync.Mutex
	lead := 0
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		task := firstUser(req)
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			if !hasToolResult(req) {
				return calls(look)
			}
			sum := "45"
			if req.Header.Get(llm.HeaderAgent) == "A2" {
				sum = "42"
			}
			return calls(call("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total is " + sum, "evidence": []string{"/inputs/data.csv"}}}}))
		case "investigator":
			if !hasToolResult(req) {
				return calls(look)
			}
			return calls(call("report", map[string]any{"summary": "recomputed: 42", "claims": []map[string]any{{"text": "the total is 42", "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			if !hasToolResult(req) {
				return calls(bash("ls -l /inputs && awk 'NR>1{s+=$1} END{print s}' /inputs/data.csv"))
			}
			v := map[string]any{"verdict": "insufficient", "checks": []string{"ls -l", "awk sum: 42"}}
			switch {
			case !strings.Contains(task, "Focus:"): // the lead's own verify calls settle nothing
			case strings.Contains(task, "the total is 45"):
				v = map[string]any{"verdict": "refuted", "location": "/inputs/data.csv", "repair": "the total is 42", "checks": []string{"awk sum: 42"}}
			default:
				v = map[string]any{"verdict": "supported", "checks": []string{"awk sum: 42"}}
			}
			return calls(call("verdict", v))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum A", "objective": "sum n"}),
				call("board_add", map[string]any{"title": "sum B", "objective": "sum n again"}),
				call("board_add", map[string]any{"title": "total", "objective": "report the total", "deps": []string{"T1", "T2"}}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file", "bash"}}),
				call("dispatch", map[string]any{"item": "T2", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file", "bash"}}))
		case 2, 3:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 4:
			return calls(call("verify", map[string]any{"claim": "the total is 45", "evidence": []string{"/inputs/data.csv"}}),
				call("verify", map[string]any{"claim": "the total is 42", "evidence": []string{"/inputs/data.csv"}}))
		case 5:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "reported", "refs": []string{"report:A1"}}),
				call("board_resolve", map[string]any{"id": "T2", "note": "reported", "refs": []string{"report:A2"}}),
				call("board_resolve", map[string]any{"id": "T3", "note": "the total is 42"}),
				finish("the total is 42"))
		}
		return calls(finish("the total is 42"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--json", "--inputs", inputs, "Sum n")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	dir := onlyRun(t, home)
	var waves, investigators int
	for _, e := range decodeAll[record.Effort](t, runtest.Events(t, dir), record.TypeEffort) {
		switch e.Phase {
		case record.EffortWave:
			waves++
		case record.EffortInvestigator:
			investigators++
		}
	}
	if waves == 0 || investigators == 0 {
		t.Fatalf("no effort wave ran (%d waves, %d investigators): the test needs one", waves, investigators)
	}
	for i := range 3 { // the verifiers race each time
		code, out, errOut := cli(t, "replay", "--home", home, filepath.Base(dir))
		if code != 0 || out != "identical\n" || !strings.Contains(errOut, "differed only in nondeterministic_output") || strings.Contains(errOut, "note:") {
			t.Fatalf("replay %d of the effort wave: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}
	code, out, _ := cli(t, "replay", "--home", home, "--json", filepath.Base(dir))
	var rep struct {
		Identical   bool
		Classes     map[string]int
		Divergences []struct{ Class, Kind, What string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Identical || rep.Classes["nondeterministic_output"] == 0 || len(rep.Classes) != 1 {
		t.Fatalf("replay --json: exit %d\n%s", code, out)
	}
	for _, d := range rep.Divergences {
		if d.Kind != "observation" || !strings.Contains(d.What, "file times") {
			t.Errorf("a difference in nondeterministic output: %+v", d)
		}
	}
}
