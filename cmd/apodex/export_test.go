package main

import (
	"encoding/json"
	"github.com/apodex/apodex/internal/runtest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/trajectory/atiftest"
)

// fakeRun runs an agent against a fresh fake endpoint playing turns, in
// home, and returns the run id.
func fakeRun(t *testing.T, home string, wantCode int, extra []string, turns ...llmtest.Turn) string {
	t.Helper()
	srv := llmtest.NewOpenAI(t, llmtest.Script(turns...))
	args := append(openaiArgs(home, srv), "--quiet", "--json")
	args = append(args, extra...)
	code, out, errOut := cli(t, args...)
	if code != wantCode {
		t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, wantCode, out, errOut)
	}
	return decodeSummary(t, out).RunID
}

// scriptedRun runs a bundled example in home.
func scriptedRun(t *testing.T, home string, extra ...string) string {
	t.Helper()
	args := append([]string{"run", "--home", home, "--provider", "scripted", "--quiet", "--json"}, extra...)
	code, out, errOut := cli(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
	}
	return decodeSummary(t, out).RunID
}

type chatLine struct {
	Messages []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Metadata struct {
		StartedBy  string   `json:"started_by"`
		Trajectory string   `json:"trajectory_id"`
		Run        string   `json:"run"`
		Agent      string   `json:"agent"`
		Role       string   `json:"role"`
		Parent     string   `json:"parent"`
		Children   []string `json:"children"`
	} `json:"metadata"`
}

// chatText is a chat line's words, all messages.
func chatText(c chatLine) string {
	var b strings.Builder
	for _, m := range c.Messages {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

// checkChat asserts that every line is well formed: each assistant call is
// answered by one tool message with its id before the next assistant turn,
// and no tool message answers a call not made.
func checkChat(t *testing.T, out string) []chatLine {
	t.Helper()
	var lines []chatLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var c chatLine
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("not a JSON line: %v\n%s", err, l)
		}
		pending := map[string]bool{}
		for i, m := range c.Messages {
			switch m.Role {
			case "assistant":
				if len(pending) > 0 {
					t.Errorf("%s: message %d: calls %v were never answered", c.Metadata.Trajectory, i, pending)
				}
				for _, tc := range m.ToolCalls {
					if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
						t.Errorf("%s: malformed tool call %+v", c.Metadata.Trajectory, tc)
					}
					pending[tc.ID] = true
				}
			case "tool":
				if !pending[m.ToolCallID] {
					t.Errorf("%s: message %d answers %q, which is not an open call", c.Metadata.Trajectory, i, m.ToolCallID)
				}
				delete(pending, m.ToolCallID)
			case "system", "user":
			default:
				t.Errorf("%s: role %q", c.Metadata.Trajectory, m.Role)
			}
		}
		if len(c.Tools) == 0 {
			t.Errorf("%s: no tools", c.Metadata.Trajectory)
		}
		lines = append(lines, c)
	}
	return lines
}

func TestExportChatAndATIF(t *testing.T) {
	home := t.TempDir()
	react := fakeRun(t, home, 0, []string{"List your files, then finish"},
		calls(call("list_files", map[string]any{"path": "/workspace"}), bash("echo hi")),
		calls(finish("listed")))
	team := scriptedRun(t, home, "--mode", "team", "--script", "../../examples/team-csv/script.json",
		"--inputs", "../../examples/team-csv/inputs", "Sum north and south, then report")

	code, out, errOut := cli(t, "export", "--home", home, "--format", "chat", "--metadata", "inline", react, team)
	if code != 0 {
		t.Fatalf("export chat: exit %d\n%s", code, errOut)
	}
	lines := checkChat(t, out)
	per := map[string][]chatLine{}
	for _, l := range lines {
		per[l.Metadata.Run] = append(per[l.Metadata.Run], l)
	}
	if n := len(per[react]); n != 1 {
		t.Errorf("react run: %d lines, want 1", n)
	}
	tl := per[team]
	if len(tl) != 6 {
		t.Fatalf("team run: %d lines, want 6 (lead, three subagents, the two verifiers)", len(tl))
	}
	if tl[0].Metadata.Agent != "lead" || tl[0].Metadata.Parent != "" || len(tl[0].Metadata.Children) != 5 {
		t.Errorf("first team line is not the lead with five children: %+v", tl[0].Metadata)
	}
	// The lead's two verify calls ran at once; each verifier is its own
	// trajectory with its own conversation.
	for _, id := range []string{"V1", "V2"} {
		i := slices.IndexFunc(tl, func(l chatLine) bool { return l.Metadata.Agent == id })
		if i < 0 {
			t.Errorf("no chat line of verifier %s", id)
			continue
		}
		if tl[i].Metadata.Role != "verifier" || strings.Count(chatText(tl[i]), "Claim:\n") != 1 {
			t.Errorf("verifier %s: role %q, conversation %.300s", id, tl[i].Metadata.Role, chatText(tl[i]))
		}
	}
	for _, l := range tl[1:] {
		if l.Metadata.Parent != team+"/lead" || !strings.Contains(strings.Join(tl[0].Metadata.Children, " "), l.Metadata.Trajectory) {
			t.Errorf("subagent %s is not linked to the lead: %+v", l.Metadata.Agent, l.Metadata)
		}
	}

	for _, l := range tl {
		if l.Metadata.Role == "verifier" && !strings.HasPrefix(l.Metadata.StartedBy, "call_") {
			t.Errorf("verifier %s names no verify call that started it: %+v", l.Metadata.Trajectory, l.Metadata)
		}
	}

	outDir := t.TempDir()
	if code, _, errOut := cli(t, "export", "--home", home, "--format", "atif", "--out", outDir, react, team); code != 0 {
		t.Fatalf("export atif: exit %d\n%s", code, errOut)
	}
	for _, id := range []string{react, team} {
		raw, err := os.ReadFile(filepath.Join(outDir, id, "trajectory.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range atiftest.Validate(raw) {
			t.Errorf("%s: trajectory.json breaks a rule of Harbor's models: %s", id, e)
		}
		var tr struct {
			Steps []struct {
				Observation *struct {
					Results []struct {
						Refs []struct {
							TrajectoryID string `json:"trajectory_id"`
						} `json:"subagent_trajectory_ref"`
					} `json:"results"`
				} `json:"observation"`
			} `json:"steps"`
			Subs []struct {
				TrajectoryID string `json:"trajectory_id"`
			} `json:"subagent_trajectories"`
		}
		json.Unmarshal(raw, &tr)
		embedded := map[string]bool{}
		for _, s := range tr.Subs {
			embedded[s.TrajectoryID] = true
		}
		refs := 0
		for _, s := range tr.Steps {
			if s.Observation == nil {
				continue
			}
			for _, r := range s.Observation.Results {
				for _, ref := range r.Refs {
					refs++
					if !embedded[ref.TrajectoryID] {
						t.Errorf("%s: ref %s has no embedded trajectory", id, ref.TrajectoryID)
					}
				}
			}
		}
		// Three dispatched subagents, each referenced from its dispatch's
		// result, and the two verifiers the runtime started for the
		// lead's verify calls, each referenced from its call's result.
		if id == team && (len(tr.Subs) != 5 || refs != 5) {
			t.Errorf("team: %d embedded subagents and %d refs, want 5 and 5", len(tr.Subs), refs)
		}
	}

	// native: one archive holding the record.
	arch := filepath.Join(t.TempDir(), "a")
	if code, _, errOut := cli(t, "export", "--home", home, "--format", "native", "--out", arch, react); code != 0 {
		t.Fatalf("export native: exit %d\n%s", code, errOut)
	}
	list, err := exec.Command("tar", "-tzf", filepath.Join(arch, react+".tar.gz")).Output()
	if err != nil || !strings.Contains(string(list), react+"/events.jsonl") {
		t.Errorf("archive lacks %s/events.jsonl (%v):\n%s", react, err, list)
	}
}

type report struct {
	Trajectories []struct {
		Run     string   `json:"run"`
		Kept    bool     `json:"kept"`
		Reasons []string `json:"reasons"`
	} `json:"trajectories"`
}

func readReport(t *testing.T, p string) map[string][]string {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(fileContent(t, p)), &r); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, x := range r.Trajectories {
		if x.Kept != (len(x.Reasons) == 0) {
			t.Errorf("%s: kept %v with reasons %v", x.Run, x.Kept, x.Reasons)
		}
		out[x.Run] = x.Reasons
	}
	return out
}

func TestExportDropReasons(t *testing.T) {
	home := t.TempDir()
	unknown := fakeRun(t, home, 0, []string{"Do it"},
		calls(call("frobnicate", map[string]any{"x": 1})),
		calls(finish("done")))
	undelivered := fakeRun(t, home, 1, []string{"--max-turns", "3", "Write /outputs/x.txt"},
		calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/x.txt"}})),
		calls(finish("done")), calls(finish("done")))
	clean := scriptedRun(t, home, "--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")

	rep := filepath.Join(t.TempDir(), "report.json")
	code, out, errOut := cli(t, "export", "--home", home, "--format", "chat", "--metadata", "inline", "--drop", "invalid-tool,inconsistent-state,ignored-observation,incomplete-delivery",
		"--require-verified", "--report", rep, unknown, undelivered, clean)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, errOut)
	}
	got := readReport(t, rep)
	has := func(run, prefix string) bool {
		for _, r := range got[run] {
			if strings.HasPrefix(r, prefix) {
				return true
			}
		}
		return false
	}
	if !has(unknown, "invalid-tool: ") || !strings.Contains(strings.Join(got[unknown], " "), "frobnicate") {
		t.Errorf("the unknown-tool run is not dropped as invalid-tool: %v", got[unknown])
	}
	if !has(undelivered, "incomplete-delivery: ") {
		t.Errorf("the undelivered run is not dropped as incomplete-delivery: %v", got[undelivered])
	}
	if r, ok := got[clean]; !ok || len(r) != 0 {
		t.Errorf("the clean verified run is not kept: %v", r)
	}
	lines := checkChat(t, out)
	if len(lines) != 1 || lines[0].Metadata.Run != clean {
		t.Errorf("want only the clean run's line, got %d lines", len(lines))
	}

	// gold: the answer must hold the expected number.
	gold := filepath.Join(t.TempDir(), "gold.json")
	os.WriteFile(gold, []byte(`{"`+clean+`": "6637.00"}`), 0o644)
	if code, _, _ := cli(t, "export", "--home", home, "--gold", gold, "--report", rep, clean); code != 0 || len(readReport(t, rep)[clean]) != 0 {
		t.Errorf("the right gold answer dropped the run: %v", readReport(t, rep)[clean])
	}
	os.WriteFile(gold, []byte(`{"`+clean+`": "9999"}`), 0o644)
	cli(t, "export", "--home", home, "--gold", gold, "--report", rep, clean)
	if r := readReport(t, rep)[clean]; len(r) == 0 || !strings.HasPrefix(r[0], "gold:") {
		t.Errorf("a wrong gold answer kept the run: %v", r)
	}
	// min-grade without a grade says how to get one.
	cli(t, "export", "--home", home, "--min-grade", "10", "--report", rep, clean)
	if r := readReport(t, rep)[clean]; len(r) == 0 || !strings.Contains(r[0], "apodex grade") {
		t.Errorf("an ungraded run under --min-grade: %v", r)
	}
}

// The record's events of type typ.
func seqsOf(evs []record.Event, typ string) []int64 {
	var out []int64
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e.Seq)
		}
	}
	return out
}

func TestExportGradePivotUsage(t *testing.T) {
	home := t.TempDir()
	id := fakeRun(t, home, 0, []string{"Go"}, calls(finish("done")))
	for _, tc := range []struct {
		args []string
		code int
		hint string
	}{
		{[]string{"export", "--home", home, "--format", "csv", id}, 2, "use chat, atif or native"},
		{[]string{"export", "--home", home, "--drop", "boring", id}, 2, "invalid-tool"},
		{[]string{"export", "--home", home, "--min-grade", "speed=3", id}, 2, "decomposition"},
		{[]string{"export", "--home", home}, 2, "--follow EVAL_ID"},
		{[]string{"export", "--home", home, "--follow", "e-none"}, 2, "no eval e-none"},
		{[]string{"show", "--home", home, "--grade", id}, 1, "apodex grade " + id},
		{[]string{"pivot", "--home", home, id}, 2, "--siblings"},
	} {
		code, _, errOut := cli(t, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errOut)
		}
		oneLineMessage(t, errOut, tc.hint)
	}
}

// runtimeAgentsExported exports dir's run (ATIF and chat) and fails unless
// every agent the runtime started (agent_started: verifiers, effort
// investigators, the writer) is a trajectory of its own, with its role,
// embedded and referenced once from the step that started it, and a chat
// sample of its own.
func runtimeAgentsExported(t *testing.T, dir string) {
	t.Helper()
	home, id := filepath.Dir(filepath.Dir(dir)), filepath.Base(dir)
	started := map[string]record.AgentStarted{}
	for _, e := range runtest.Events(t, dir) {
		var a record.AgentStarted
		if e.Type == record.TypeAgentStarted && e.Decode(&a) == nil {
			started[e.Agent] = a
		}
	}
	if len(started) == 0 {
		t.Fatal("the run started no agent of its own: the check proves nothing")
	}
	out := t.TempDir()
	if code, _, errOut := cli(t, "export", "--home", home, "--format", "atif", "--out", out, id); code != 0 {
		t.Fatalf("export atif: exit %d\n%s", code, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(out, id, "trajectory.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range atiftest.Validate(raw) {
		t.Errorf("trajectory.json breaks a rule of Harbor's models: %s", e)
	}
	var tr struct {
		Steps []struct {
			Observation *struct {
				Results []struct {
					Refs []struct {
						TrajectoryID string `json:"trajectory_id"`
					} `json:"subagent_trajectory_ref"`
				} `json:"results"`
			} `json:"observation"`
		} `json:"steps"`
		Subs []struct {
			TrajectoryID string `json:"trajectory_id"`
			Agent        struct {
				Name  string         `json:"name"`
				Extra map[string]any `json:"extra"`
			} `json:"agent"`
		} `json:"subagent_trajectories"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	refs := map[string]int{}
	for _, s := range tr.Steps {
		if s.Observation == nil {
			continue
		}
		for _, r := range s.Observation.Results {
			for _, ref := range r.Refs {
				refs[ref.TrajectoryID]++
			}
		}
	}
	for agentID, a := range started {
		found := ""
		for _, s := range tr.Subs {
			if strings.HasSuffix(s.TrajectoryID, "/"+agentID) || strings.Contains(string(mustJSON(s)), `"`+agentID+`"`) {
				found = s.TrajectoryID
			}
		}
		if found == "" {
			t.Errorf("%s (%s) is not an embedded trajectory of its own; embedded: %s", agentID, a.Role, mustJSON(tr.Subs))
			continue
		}
		if refs[found] != 1 {
			t.Errorf("%s (%s) is referenced %d times from the lead's steps, want once", agentID, a.Role, refs[found])
		}
	}
	chat := filepath.Join(t.TempDir(), "chat.jsonl")
	if code, _, errOut := cli(t, "export", "--home", home, "--format", "chat", "--metadata", "inline", "--out", chat, id); code != 0 {
		t.Fatalf("export chat: exit %d\n%s", code, errOut)
	}
	lines, _ := os.ReadFile(chat)
	for agentID, a := range started {
		if !strings.Contains(string(lines), `"agent":"`+agentID+`"`) {
			t.Errorf("%s (%s) has no chat sample of its own", agentID, a.Role)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
