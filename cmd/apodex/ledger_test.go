package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// meet puts a gate in front of srv: requests of role wait there until n
// of them are in flight at once (or 10 s pass: then the test fails), and
// go on to srv. It returns the base URL to give the run and a func that
// reports whether n were ever in flight together.
func meet(t *testing.T, srv *llmtest.Server, role string, n int) (string, func() bool) {
	t.Helper()
	var mu sync.Mutex
	inflight, met := 0, false
	all := make(chan struct{})
	up := strings.TrimSuffix(srv.URL, "/v1")
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(llm.HeaderRole) == role {
			mu.Lock()
			inflight++
			if inflight >= n && !met {
				met = true
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				t.Errorf("%s requests never were %d in flight at once", role, n)
			}
			defer func() {
				mu.Lock()
				inflight--
				mu.Unlock()
			}()
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, up+r.URL.Path, r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(gate.Close)
	return gate.URL + "/v1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return met
	}
}

// toolResult is the output a request shows for the last call of name.
func toolResult(req llmtest.Request, name string) string {
	ids := map[string]string{}
	out := ""
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			ids[c.ID] = c.Name
		}
		if m.Role == "tool" && ids[m.ToolCallID] == name {
			out = m.Content
		}
	}
	return out
}

func ledgerOf(t *testing.T, home, dir string) map[string]claims.Claim {
	t.Helper()
	code, out, errOut := cli(t, "claims", "--home", home, "--json", filepath.Base(dir))
	if code != 0 {
		t.Fatalf("claims: exit %d: %s", code, errOut)
	}
	var g struct{ Claims []claims.Claim }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	m := map[string]claims.Claim{}
	for _, c := range g.Claims {
		m[c.ID] = c
	}
	return m
}

// sumInputs is a directory with data.csv (40 + 2).
func sumInputs(t *testing.T) string {
	t.Helper()
	inputs := t.TempDir()
	if err := os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("n\n40\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return inputs
}

// The lead sees its subagents' claim ids at once (in the report and in
// board_view), verifies one by id, cites it in the report it writes and
// marks the other side: the verdict settles the cited claim, the side one
// is not load-bearing, and finish runs no investigator at all.
func TestVerifyByIDSettlesTheClaim(t *testing.T) {
	home, inputs := t.TempDir(), sumInputs(t)
	var mu sync.Mutex
	lead := 0
	var reportObs, verifyOut, boardOut, verifierTask string
	totalID, utfID := "K?", "K?"
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			text := "the total of n is 42"
			if req.Header.Get(llm.HeaderAgent) == "A2" {
				text = "the file is UTF-8"
			}
			return calls(call("report", map[string]any{"summary": "done", "claims": []map[string]any{{"text": text, "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			verifierTask = firstUser(req)
			return calls(call("verdict", map[string]any{"verdict": "supported", "checks": []string{"awk sum: 42"}}))
		case "investigator":
			t.Errorf("an investigator ran: %.200s", firstUser(req))
			return calls(call("report", map[string]any{"summary": "n/a"}))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n"}),
				call("board_add", map[string]any{"title": "encoding", "objective": "check the encoding"}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}),
				call("dispatch", map[string]any{"item": "T2", "role": "checker", "instructions": "Encoding.", "tools": []string{"read_file"}}))
		case 2, 3:
			return calls(call("wait", map[string]any{"assignments": []string{"A1", "A2"}, "timeout_s": 5}))
		case 4:
			// The two reports may come in either order: read the ids.
			reportObs = lastText(req)
			if m := regexp.MustCompile(`- claim (K[0-9]+): the total`).FindStringSubmatch(reportObs); m != nil {
				totalID = m[1]
			}
			if m := regexp.MustCompile(`- claim (K[0-9]+): the file`).FindStringSubmatch(reportObs); m != nil {
				utfID = m[1]
			}
			return calls(call("verify", map[string]any{"claim": totalID}), call("board_view", map[string]any{}))
		case 5:
			verifyOut, boardOut = toolResult(req, "verify"), toolResult(req, "board_view")
			return calls(call("mark_claim", map[string]any{"claim": utfID, "mark": "side", "reason": "the report does not use the encoding"}),
				call("board_resolve", map[string]any{"id": "T1", "note": "verified", "refs": []string{"report:A1"}}),
				call("board_resolve", map[string]any{"id": "T2", "note": "ok", "refs": []string{"report:A2"}}),
				call("claim_outputs", map[string]any{"paths": []string{"/outputs/report.md"}}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": "# Total\n\nThe total is 42 [" + totalID + "].\n"}))
		}
		return calls(finish("the total is 42"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--synthesis", "off", "--inputs", inputs, "Sum n")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	dir := onlyRun(t, home)
	mu.Lock()
	defer mu.Unlock()
	if totalID == "K?" || utfID == "K?" {
		t.Fatalf("the reports reached the lead without claim ids: %q", reportObs)
	}
	if !strings.Contains(verifierTask, "the total of n is 42") || !strings.Contains(verifierTask, "/inputs/data.csv") {
		t.Errorf("verify by id did not send the claim with its own evidence: %q", verifierTask)
	}
	if !strings.Contains(verifyOut, "verdict: supported (claim "+totalID+")") || !strings.Contains(verifyOut, "ledger: "+totalID+" is corroborated (settled)") {
		t.Errorf("verify's result: %q", verifyOut)
	}
	if !strings.Contains(boardOut, totalID+"  T") || !strings.Contains(boardOut, "corroborated settled: the total of n is 42") {
		t.Errorf("board_view does not show the ledger: %q", boardOut)
	}
	l := ledgerOf(t, home, dir)
	var total, utf claims.Claim
	for _, c := range l {
		if strings.Contains(c.Text, "42") {
			total = c
		} else {
			utf = c
		}
	}
	if total.ID != "K1" && total.ID != "K2" {
		t.Fatalf("ledger %+v", l)
	}
	if !total.Settled || total.Status != claims.Corroborated || !total.LoadBearing || !slices.Contains(total.Bears, "cited by /outputs/report.md") {
		t.Errorf("the verified, cited claim: %+v; want settled, corroborated, load-bearing (cited by /outputs/report.md)", total)
	}
	if utf.LoadBearing || utf.Side == "" {
		t.Errorf("the side claim: %+v; want not load-bearing, side", utf)
	}
	for _, e := range decodeAll[record.Effort](t, runtest.Events(t, dir), record.TypeEffort) {
		t.Errorf("effort event %+v; want none: every load-bearing claim is settled", e)
	}
}

// A refuted load-bearing claim blocks finish, naming the claim and its
// item; once the item is reopened, redone and resolved again, finish goes
// through and the old claim is withdrawn.
func TestRefutedClaimBlocksFinish(t *testing.T) {
	home, inputs := t.TempDir(), sumInputs(t)
	var mu sync.Mutex
	lead := 0
	var refusal string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		task := firstUser(req)
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			sum := "42"
			if req.Header.Get(llm.HeaderAgent) == "A1" {
				sum = "45"
			}
			return calls(call("report", map[string]any{"summary": "summed", "claims": []map[string]any{{"text": "the total is " + sum, "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			if strings.Contains(task, "the total is 45") {
				return calls(call("verdict", map[string]any{"verdict": "refuted", "location": "/inputs/data.csv", "repair": "the total is 42", "checks": []string{"awk"}}))
			}
			return calls(call("verdict", map[string]any{"verdict": "supported", "checks": []string{"awk"}}))
		case "investigator":
			t.Errorf("an investigator ran")
			return calls(call("report", map[string]any{"summary": "n/a"}))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n"}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 2:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 3:
			return calls(call("verify", map[string]any{"claim": "K1"}))
		case 4: // resolve it anyway
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "reported"}), finish("the total is 45"))
		case 5:
			refusal = lastText(req)
			return calls(call("board_reopen", map[string]any{"id": "T1", "reason": "K1 was refuted"}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n again, carefully.", "tools": []string{"read_file"}}))
		case 6:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 7:
			return calls(call("verify", map[string]any{"claim": "K2"}), call("board_resolve", map[string]any{"id": "T1", "note": "redone and verified", "refs": []string{"report:A2"}}))
		}
		return calls(finish("the total is 42"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--sandbox", "none", "--json", "--synthesis", "off", "--inputs", inputs, "Sum n")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{`finish refused: a refuted claim is load-bearing: K1 "the total is 45" (by A1 on T1)`, "repair: the total is 42", "reopen T1 (board_reopen)", "withdraw K1"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal lacks %q: %q", want, refusal)
		}
	}
	if lead < 8 {
		t.Errorf("the lead made %d calls; the run ended before the repair", lead)
	}
	l := ledgerOf(t, home, onlyRun(t, home))
	if k := l["K1"]; k.Status != claims.Refuted || k.LoadBearing || !strings.Contains(k.Withdrawn, "T1 was reopened") {
		t.Errorf("K1 %+v; want refuted, withdrawn by the reopen", k)
	}
	if k := l["K2"]; !k.Settled || !k.LoadBearing {
		t.Errorf("K2 %+v; want settled and load-bearing", k)
	}
}

// Two verify calls of one turn run at once, each in its own verifier:
// two agents (V1, V2) with role and parent in show, log and the ATIF
// export, each with its own conversation and verdict.
func TestConcurrentVerifiersAreTwoAgents(t *testing.T) {
	home, inputs := t.TempDir(), sumInputs(t)
	var mu sync.Mutex
	lead := 0
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		defer mu.Unlock()
		switch req.Header.Get(llm.HeaderRole) {
		case llm.CallerSubagent:
			return calls(call("report", map[string]any{"summary": "done", "claims": []map[string]any{
				{"text": "the total is 42", "evidence": []string{"/inputs/data.csv"}}, {"text": "there are 2 rows", "evidence": []string{"/inputs/data.csv"}}}}))
		case llm.CallerVerifier:
			return calls(call("verdict", map[string]any{"verdict": "supported", "checks": []string{"read " + req.Header.Get(llm.HeaderAgent)}}))
		}
		lead++
		switch lead {
		case 1:
			return calls(call("board_add", map[string]any{"title": "sum", "objective": "sum n"}),
				call("dispatch", map[string]any{"item": "T1", "role": "summer", "instructions": "Sum n.", "tools": []string{"read_file"}}))
		case 2:
			return calls(call("wait", map[string]any{"timeout_s": 5}))
		case 3:
			return calls(call("verify", map[string]any{"claim": "K1"}), call("verify", map[string]any{"claim": "K2"}))
		case 4:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "verified"}))
		}
		return calls(finish("the total is 42"))
	})
	url, met := meet(t, srv, llm.CallerVerifier, 2)
	args := []string{"run", "--home", home, "--provider", "openai", "--base-url", url, "--model", "m",
		"--mode", "team", "--sandbox", "none", "--json", "--synthesis", "off", "--inputs", inputs, "Sum n"}
	if code, stdout, stderr := cli(t, args...); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !met() {
		t.Fatal("the two verifiers never ran at once")
	}
	dir := onlyRun(t, home)
	id := filepath.Base(dir)

	// The record: one agent_started and one verdict per verifier, each
	// verdict on its own claim.
	byAgent := map[string]string{}
	for _, e := range runtest.Events(t, dir) {
		if e.Type == record.TypeVerdict {
			var v record.Verdict
			e.Decode(&v)
			byAgent[e.Agent] = v.ClaimID
		}
	}
	if len(byAgent) != 2 || byAgent["V1"] == "" || byAgent["V2"] == "" || byAgent["V1"] == byAgent["V2"] {
		t.Errorf("verdicts by agent %v; want V1 and V2 on two claims", byAgent)
	}

	code, out, _ := cli(t, "show", "--home", home, "--json", id)
	var info struct {
		Agents []struct{ Agent, Role, Parent string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	seen := 0
	for _, a := range info.Agents {
		if (a.Agent == "V1" || a.Agent == "V2") && a.Role == "verifier" && a.Parent == "lead" {
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("show's agents %+v; want V1 and V2, verifiers of the lead", info.Agents)
	}
	code, out, _ = cli(t, "log", "--home", home, id)
	if code != 0 || !strings.Contains(out, "V1 started: verifier for lead") || !strings.Contains(out, "V2 started: verifier for lead") {
		t.Errorf("log: exit %d; want both verifiers started:\n%s", code, out)
	}
	outDir := t.TempDir()
	if code, _, errOut := cli(t, "export", "--home", home, "--format", "atif", "--out", outDir, id); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(outDir, id, "trajectory.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Subs []struct {
			TrajectoryID string `json:"trajectory_id"`
			Agent        struct {
				Extra map[string]any `json:"extra"`
			} `json:"agent"`
		} `json:"subagent_trajectories"`
	}
	json.Unmarshal(raw, &tr)
	verifiers := 0
	for _, s := range tr.Subs {
		if s.Agent.Extra["role"] == "verifier" && (strings.HasSuffix(s.TrajectoryID, "/V1") || strings.HasSuffix(s.TrajectoryID, "/V2")) {
			verifiers++
		}
	}
	if verifiers != 2 {
		t.Errorf("ATIF subagent trajectories %+v; want V1 and V2", tr.Subs)
	}
}
