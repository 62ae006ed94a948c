package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/grade"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// graderEndpoint plays the four grader roles by the X-Apodex-Role header.
// The judge's first answer cites a seq that does not exist; two items get
// band 2, and the reviewer disputes one of them.
type graderEndpoint struct {
	mu    sync.Mutex
	roles []string
	cite  int64 // a visible seq
	bad   int64 // a seq that exists but is withheld
}

func (g *graderEndpoint) policy(n int, req llmtest.Request) llmtest.Turn {
	role := req.Header.Get(llm.HeaderRole)
	g.mu.Lock()
	g.roles = append(g.roles, role)
	judgeCalls := 0
	for _, r := range g.roles {
		if r == grade.RoleJudge {
			judgeCalls++
		}
	}
	g.mu.Unlock()
	answer := func(name string, v any) llmtest.Turn {
		raw, _ := json.Marshal(v)
		return llmtest.Turn{Calls: []llm.ToolCall{{Name: name, Arguments: string(raw)}}}
	}
	type b = map[string]any
	switch role {
	case grade.RoleMapper:
		return answer("record_windows", b{"windows": []b{{"item": "decomposition.1", "seqs": []int64{g.cite}}}})
	case grade.RoleJudge:
		var items []b
		for i, it := range grade.Items() {
			band := i % 2 // 0 and 1
			if it.ID == "decomposition.2" || it.ID == "delivery.1" {
				band = 2
			}
			items = append(items, b{"item": it.ID, "band": band, "cites": []int64{g.cite}, "rationale": "seen at the cited step"})
		}
		if judgeCalls == 1 {
			items[0]["cites"] = []int64{999999}
		}
		if judgeCalls == 2 {
			items[0]["cites"] = []int64{g.bad}
		}
		return answer("record_bands", b{"items": items})
	case grade.RoleReviewer:
		return answer("record_reviews", b{"items": []b{
			{"item": "decomposition.2", "agree": true, "band": 2, "cites": []int64{g.cite}, "rationale": "earned"},
			{"item": "delivery.1", "agree": false, "band": 1, "cites": []int64{g.cite}, "rationale": "the check is not independent"},
		}})
	case grade.RoleArbiter:
		return answer("record_settlements", b{"items": []b{{"item": "delivery.1", "band": 1, "cites": []int64{g.cite}, "rationale": "the reviewer is right"}}})
	}
	return llmtest.Turn{Content: "who are you? role " + role}
}

func TestGradeFourStages(t *testing.T) {
	home := t.TempDir()
	id := scriptedRun(t, home, "--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")
	dir := filepath.Join(home, "runs", id)
	evs := runtest.Events(t, dir)
	g := &graderEndpoint{cite: seqsOf(evs, record.TypeToolCall)[0], bad: seqsOf(evs, record.TypeVerification)[0]}
	srv := llmtest.NewOpenAI(t, g.policy)

	code, out, errOut := cli(t, "grade", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "grader", "--arbiter-model", "arbiter-m", "--json", id)
	if code != 0 {
		t.Fatalf("grade: exit %d\n%s%s", code, out, errOut)
	}
	var res grade.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 24 {
		t.Fatalf("%d items, want 24", len(res.Items))
	}
	exists := map[int64]bool{}
	for _, e := range evs {
		exists[e.Seq] = true
	}
	total := 0
	for _, it := range res.Items {
		if it.Band < 0 || it.Band > 2 {
			t.Errorf("%s: band %d", it.Item, it.Band)
		}
		for _, c := range it.Cites {
			if !exists[c] || c == g.bad {
				t.Errorf("%s cites seq %d, not a visible event", it.Item, c)
			}
		}
		total += it.Band
	}
	if total != res.Total {
		t.Errorf("total %d, bands sum to %d", res.Total, total)
	}
	count := map[string]int{}
	for _, r := range g.roles {
		count[r]++
	}
	if count[grade.RoleMapper] != 1 || count[grade.RoleJudge] != 3 || count[grade.RoleReviewer] != 1 || count[grade.RoleArbiter] != 1 {
		t.Errorf("calls by role %v: want mapper 1, judge 3 (two bad cites asked again), reviewer 1, arbiter 1", count)
	}
	byItem := map[string]grade.Verdict{}
	for _, it := range res.Items {
		byItem[it.Item] = it
	}
	if v := byItem["delivery.1"]; v.Band != 1 || len(v.History) != 3 || v.History[2].Stage != "arbiter" {
		t.Errorf("the disputed item was not settled by the arbiter: %+v", v)
	}
	if v := byItem["decomposition.2"]; v.Band != 2 || len(v.History) != 2 || v.History[1].Stage != "reviewer" {
		t.Errorf("the band-2 item was not reviewed: %+v", v)
	}
	reqs := srv.Requests()
	for i, r := range reqs {
		body := string(r.Raw)
		for _, secret := range []string{"report states", "tests passed", "(completed)", "termination", "runtime verification", "runtime delivery", "runtime run_finished", "delivered\\\":"} {
			if strings.Contains(body, secret) {
				t.Errorf("grader request %d (%s) contains %q", i, r.Header.Get(llm.HeaderRole), secret)
			}
		}
		if r.Header.Get(llm.HeaderRole) == grade.RoleArbiter && r.Model != "arbiter-m" {
			t.Errorf("the arbiter ran on %q, want --arbiter-model arbiter-m", r.Model)
		}
	}
	if !strings.Contains(string(reqs[3].Raw), fmt.Sprintf("seq %d is not a line of the visible log", g.bad)) {
		t.Errorf("the judge's third request (after a withheld cite) does not say why its withheld cite was refused")
	}
	// grade.json and show --grade.
	code, shown, _ := cli(t, "show", "--home", home, "--grade", id)
	if code != 0 || !strings.Contains(shown, fmt.Sprintf("HDS6 %d/48", res.Total)) || !strings.Contains(shown, "arbiter") {
		t.Errorf("show --grade:\n%s", shown)
	}
	// --min-grade reads it.
	rep := filepath.Join(t.TempDir(), "r.json")
	cli(t, "export", "--home", home, "--min-grade", fmt.Sprintf("%d", res.Total+1), "--report", rep, id)
	if r := readReport(t, rep)[id]; len(r) != 1 || !strings.HasPrefix(r[0], "min-grade:") {
		t.Errorf("--min-grade above the total: %v", r)
	}
	cli(t, "export", "--home", home, "--min-grade", "decomposition=0", "--report", rep, id)
	if r := readReport(t, rep)[id]; len(r) != 0 {
		t.Errorf("--min-grade decomposition=0 dropped the run: %v", r)
	}
}
