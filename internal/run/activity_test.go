package run_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
)

// teamRun runs the team-csv example and returns its record.
func teamRun(t *testing.T) (run.Summary, []record.Event) {
	t.Helper()
	m, err := scripted.Load("../../examples/team-csv/script.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "team", nil)
	cfg.Model, cfg.Mode, cfg.InputsDir, cfg.Sandbox = m, run.ModeTeam, "../../examples/team-csv/inputs", runtest.SandboxKind()
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != run.StatusCompleted {
		t.Fatalf("the team demo ended %s (%s): %s", s.Status, s.Termination, s.Error)
	}
	return s, runtest.Events(t, s.RunDir)
}

// perAgent counts the events of typ by envelope agent.
func perAgent(evs []record.Event, typ string) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		if e.Type == typ {
			n[e.Agent]++
		}
	}
	return n
}

func TestActivityOfTeamRun(t *testing.T) {
	_, evs := teamRun(t)
	acts := runview.Activity(evs)
	var ids []string
	for _, a := range acts {
		ids = append(ids, a.Agent)
	}
	// Each verifier's calls are model responses too: it is an agent of the
	// activity, with its usage; the lead's two verify calls run at once,
	// so either verifier may come first.
	if want, or := []string{"lead", "A1", "A2", "V1", "V2", "A3"}, []string{"lead", "A1", "A2", "V2", "V1", "A3"}; !slices.Equal(ids, want) && !slices.Equal(ids, or) {
		t.Fatalf("agents %v, want %v", ids, want)
	}
	calls, turns := perAgent(evs, record.TypeToolCall), perAgent(evs, record.TypeModelResponse)
	roles := map[string]string{"lead": "lead", "A1": "CSV summer (north)", "A2": "CSV summer (south)", "A3": "report writer", "V1": "verifier", "V2": "verifier"}
	items := map[string]string{"A1": "T1", "A2": "T2", "A3": "T3"}
	for _, a := range acts {
		t.Run(a.Agent, func(t *testing.T) {
			if a.ToolCalls != calls[a.Agent] || a.Turns != turns[a.Agent] {
				t.Errorf("tools %d turns %d; the record has %d tool calls and %d responses", a.ToolCalls, a.Turns, calls[a.Agent], turns[a.Agent])
			}
			if a.Role != roles[a.Agent] || a.Item != items[a.Agent] {
				t.Errorf("role %q item %q, want %q %q", a.Role, a.Item, roles[a.Agent], items[a.Agent])
			}
			if a.Agent != "lead" && a.Role != "verifier" && (a.State != "reported" || a.Queued.IsZero() || a.Queued.After(a.From)) {
				t.Errorf("state %q queued %v from %v: want reported, queued before it started", a.State, a.Queued, a.From)
			}
			if a.From.IsZero() || a.To.Before(a.From) || a.ActiveMS != a.To.Sub(a.From).Milliseconds() {
				t.Errorf("span %v → %v, active %d ms", a.From, a.To, a.ActiveMS)
			}
		})
	}
	if got := acts[0].ToolErrors; got != 2 {
		t.Errorf("lead tool errors %d, want 2 (the refused early dispatch and finish)", got)
	}

	as := runview.Assignments(evs)
	if len(as) != 3 {
		t.Fatalf("assignments %+v", as)
	}
	for _, a := range as {
		if got := strings.Join(a.Lifecycle, " "); got != "created queued running reported" {
			t.Errorf("%s lifecycle %q", a.ID, got)
		}
	}

	b, found, err := runview.BoardOf(evs)
	if err != nil || !found {
		t.Fatalf("board: found %v, %v", found, err)
	}
	for _, it := range b.Items() {
		if it.State != board.Resolved {
			t.Errorf("%s is %s", it.ID, it.State)
		}
	}
	if runview.ModeOf(evs) != run.ModeTeam {
		t.Errorf("mode %q", runview.ModeOf(evs))
	}
}

// Edge cases on hand-written records: who counts as an agent, and when.
func TestActivityCases(t *testing.T) {
	type ev struct {
		typ, agent string
		payload    any
	}
	assign := func(id, state, reason string) map[string]any {
		return map[string]any{"assignment": id, "item": "T1", "role": "r", "state": state, "reason": reason}
	}
	cases := []struct {
		name   string
		events []ev
		want   []string // agent:turns/tools/toolErrors/modelErrors/state
	}{
		{"react run", []ev{
			{record.TypeRunStarted, "", record.RunStarted{Tools: []string{"bash"}}},
			{record.TypeModelResponse, "main", record.ModelResponse{Turn: 1}},
			{record.TypeToolCall, "main", record.ToolCall{Turn: 1, CallID: "c1", Name: "bash"}},
			{record.TypeToolResult, "main", record.ToolResult{Turn: 1, CallID: "c1", Name: "bash", IsError: true}},
			{record.TypeModelError, "main", record.ModelError{Turn: 2, Error: "boom"}},
			{record.TypeRunFinished, "", record.RunFinished{}},
		}, []string{"main:1/1/1/1/"}},
		{"runtime and verifier are not agents", []ev{
			{record.TypeModelResponse, "lead", record.ModelResponse{Turn: 1}},
			{"board", "runtime", map[string]any{"op": "assign", "id": "T1", "owner": "A1"}},
			{"verdict", "verifier", map[string]any{"verdict": "supported"}},
		}, []string{"lead:1/0/0/0/"}},
		{"cancelled while queued", []ev{
			{record.TypeModelResponse, "lead", record.ModelResponse{Turn: 1}},
			{"assignment", "lead", assign("A1", "created", "")},
			{"assignment", "A1", assign("A1", "queued", "")},
			{"assignment", "A1", assign("A1", "cancelled", "the lead finished")},
		}, []string{"lead:1/0/0/0/", "A1:0/0/0/0/cancelled"}},
		{"failed subagent", []ev{
			{"assignment", "lead", assign("A2", "created", "")},
			{"assignment", "A2", assign("A2", "queued", "")},
			{"assignment", "A2", assign("A2", "running", "")},
			{record.TypeModelError, "A2", record.ModelError{Turn: 1, Error: "500"}},
			{"assignment", "A2", assign("A2", "failed", "model error")},
		}, []string{"A2:0/0/0/1/failed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			log, err := record.Create(dir, func() time.Time { clock = clock.Add(time.Second); return clock })
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.events {
				if _, err := log.Append(e.typ, e.agent, e.payload); err != nil {
					t.Fatal(err)
				}
			}
			log.Close()
			var got []string
			acts := runview.Activity(runtest.Events(t, dir))
			for _, a := range acts {
				got = append(got, fmt.Sprintf("%s:%d/%d/%d/%d/%s", a.Agent, a.Turns, a.ToolCalls, a.ToolErrors, a.ModelErrors, a.State))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("activity\n got %v\nwant %v", got, tc.want)
			}
			for _, a := range acts {
				if a.Queued.IsZero() != (a.Item == "") {
					t.Errorf("%s: queued %v", a.Agent, a.Queued)
				}
				if !a.Queued.IsZero() && !a.From.After(a.Queued) {
					t.Errorf("%s: active from %v, not after it was queued at %v", a.Agent, a.From, a.Queued)
				}
			}
		})
	}
}

// Load reads the delivery, the verification and the final gate's failures.
func TestLoadReadsTheGate(t *testing.T) {
	task, err := contract.Load("../../examples/csv-sum/task.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "gate", script(finish("done, without writing anything")))
	cfg.Contract, cfg.Sandbox, cfg.MaxAttempts = task, runtest.SandboxKind(), 1
	s, err := run.Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status == run.StatusCompleted || len(s.Failures) == 0 {
		t.Fatalf("a run that delivered nothing ended %s with failures %v", s.Status, s.Failures)
	}
	info, err := runview.Load(s.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Failures, s.Failures) {
		t.Errorf("failures\n got %q\nwant %q", info.Failures, s.Failures)
	}
	if info.Delivery == nil || info.Delivery.OK {
		t.Errorf("delivery %+v, want a failed one", info.Delivery)
	}
	if want := len(s.Checks) + len(s.Verify); len(info.Verification) != want || want == 0 {
		t.Errorf("%d verification results, want %d", len(info.Verification), want)
	}
	for i, f := range s.Checks {
		v := info.Verification[i]
		if v.Kind != "deliverable" || v.Passed != f.OK || !strings.Contains(v.Label, f.Path) {
			t.Errorf("result %d %+v for finding %+v", i, v, f)
		}
	}
	if info.Mode != run.ModeReact {
		t.Errorf("mode %q", info.Mode)
	}
}
