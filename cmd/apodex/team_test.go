package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// teamAgentOf names the agent behind a request to the fake endpoint, which
// sees no agent id: the lead by its system prompt, a subagent by the role
// its system prompt states ("Your role: <role>").
func teamAgentOf(req llmtest.Request, roles map[string]string) string {
	if len(req.Messages) == 0 || req.Messages[0].Role != "system" {
		return ""
	}
	sys := req.Messages[0].Content
	for role, id := range roles {
		if strings.Contains(sys, "Your role: "+role+"\n") {
			return id
		}
	}
	if strings.Contains(sys, "lead") {
		return "lead"
	}
	return ""
}

// teamTurn is the agent's turn: the assistant messages in its history.
func teamTurn(req llmtest.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// teamSeen reports whether a tool result or runtime observation the agent
// read contains s.
func teamSeen(req llmtest.Request, s string) bool {
	for _, m := range req.Messages[1:] {
		if m.Role != "assistant" && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

// teamCalled counts the calls of tool name the agent made.
func teamCalled(req llmtest.Request, name string) int {
	n := 0
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			if c.Name == name {
				n++
			}
		}
	}
	return n
}

type teamAssignment struct {
	Assignment string `json:"assignment"`
	Item       string `json:"item"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
}

// TestTeamModeEndToEnd is the "how it will be checked": the CLI in
// --mode team against an OpenAI-compatible endpoint that plays the lead and
// three subagents. The two first subagents must be in flight at once: the
// left counter's command waits (in the sandbox, through the shared
// /outputs/scratch) for a file the right counter makes, so run one after
// the other they fail instead of passing. Then the record, `show` and
// `board` are read.
func TestTeamModeEndToEnd(t *testing.T) {
	runtest.NeedSandbox(t)
	home, inputs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(inputs, "numbers.txt"), []byte("left 3\nright 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{"left counter": "A1", "right counter": "A2", "combiner": "A3"}
	dispatchTo := func(item, role string, tools ...string) map[string]any {
		return map[string]any{"item": item, "role": role, "tools": tools,
			"instructions": "Do what " + item + "'s objective says with the tools given, then report with evidence."}
	}
	lead := func(turn int, req llmtest.Request) llmtest.Turn {
		switch turn {
		case 0:
			return calls(
				call("board_add", map[string]any{"title": "Left", "objective": "Write the left number of /inputs/numbers.txt to /workspace/left.txt"}),
				call("board_add", map[string]any{"title": "Right", "objective": "Write the right number of /inputs/numbers.txt to /workspace/right.txt"}),
				call("board_add", map[string]any{"title": "Total", "objective": "Write left + right to /workspace/total.txt", "deps": []string{"T1", "T2"}}))
		case 1:
			return calls(call("dispatch", dispatchTo("T3", "combiner", "bash")), finish("too early"))
		case 2:
			return calls(call("dispatch", dispatchTo("T1", "left counter", "bash", "write_file")),
				call("dispatch", dispatchTo("T2", "right counter", "bash", "write_file")))
		}
		switch {
		case !teamSeen(req, "Assignment A1 (") || !teamSeen(req, "Assignment A2 ("):
			return calls(call("wait", map[string]any{"timeout_s": 30}))
		case teamCalled(req, "board_resolve") == 0:
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "left.txt holds 3", "refs": []string{"report:A1", "/workspace/left.txt"}}),
				call("board_resolve", map[string]any{"id": "T2", "note": "right.txt holds 4", "refs": []string{"report:A2", "/workspace/right.txt"}}))
		case teamCalled(req, "dispatch") == 3:
			return calls(call("dispatch", dispatchTo("T3", "combiner", "bash")))
		case !teamSeen(req, "Assignment A3 ("):
			return calls(call("wait", map[string]any{"assignments": []string{"A3"}, "timeout_s": 30}))
		case teamCalled(req, "board_resolve") == 2:
			return calls(call("board_resolve", map[string]any{"id": "T3", "note": "total.txt holds 7", "refs": []string{"report:A3", "/workspace/total.txt"}}))
		}
		return calls(finish("left 3 + right 4 = 7, by three subagents"))
	}
	report := func(summary, artifact string) llmtest.Turn {
		return calls(call("report", map[string]any{"summary": summary, "artifacts": []string{artifact},
			"claims": []map[string]any{{"text": summary, "evidence": []string{artifact}}}}))
	}
	subs := map[string][]llmtest.Turn{
		"A1": {
			// Polled by listing: /outputs/scratch is an overlay of the real
			// scratch per command, and a name looked up before another
			// agent's command merged it stays absent for this command.
			calls(bash(`for i in $(seq 1 300); do ls /outputs/scratch | grep -qx right-started && { echo SAW-RIGHT; break; }; sleep 0.05; done
[ -e /outputs/scratch/right-started ] || { echo NO-RIGHT; exit 1; }
echo 3 > /workspace/left.txt`)),
			report("the left number is 3", "/workspace/left.txt"),
		},
		"A2": {
			calls(bash("touch /outputs/scratch/right-started && echo 4 > /workspace/right.txt")),
			report("the right number is 4", "/workspace/right.txt"),
		},
		"A3": {
			calls(bash("echo $(( $(cat /workspace/left.txt) + $(cat /workspace/right.txt) )) > /workspace/total.txt && cat /workspace/total.txt")),
			report("the total is 7", "/workspace/total.txt"),
		},
	}
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		id, turn := teamAgentOf(req, roles), teamTurn(req)
		if id == "lead" {
			return lead(turn, req)
		}
		if s, ok := subs[id]; ok && turn < len(s) {
			return s[turn]
		}
		t.Errorf("request %d: unexpected agent %q turn %d", n, id, turn)
		return calls(finish("lost"))
	})

	// --effort off: this test scripts the lead alone; effort waves have their own test.
	args := append(openaiArgs(home, srv), "--mode", "team", "--concurrency", "2", "--effort", "off", "--json", "--inputs", inputs,
		"Write left and right from numbers.txt, then their total")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d; want 0\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	if s.Status != "completed" || s.Termination != "completed" {
		t.Errorf("summary: status %s, termination %s; want completed", s.Status, s.Termination)
	}
	dir := onlyRun(t, home)
	if s.RunDir != dir {
		t.Errorf("summary run_dir %s; the run is in %s", s.RunDir, dir)
	}
	evs := runtest.Events(t, dir)

	// Board ids and dependencies.
	var adds []board.Event
	for _, b := range decodeAll[board.Event](t, evs, "board") {
		if b.Op == board.OpAdd {
			adds = append(adds, b)
		}
	}
	if len(adds) != 3 || adds[0].ID != "T1" || adds[1].ID != "T2" || adds[2].ID != "T3" || !slices.Equal(adds[2].Deps, []string{"T1", "T2"}) {
		t.Errorf("board adds = %+v; want T1, T2 and T3 depending on both", adds)
	}

	// The refusals, as the lead read them.
	results := leadResults(t, evs)
	if r := results["dispatch"]; len(r) == 0 || !r[0].IsError || !strings.Contains(r[0].Output, "T1 (open)") || !strings.Contains(r[0].Output, "T2 (open)") {
		t.Errorf("the early dispatch was not refused naming T1 and T2: %+v", r)
	}
	if r := results["finish"]; len(r) < 2 || !r[0].IsError || !strings.Contains(r[0].Output, `T1 "Left" is open`) || r[len(r)-1].IsError {
		t.Errorf("finish: want the first refused naming the open items and the last accepted: %+v", r)
	}

	// Each assignment's lifecycle, and two in flight at once.
	seq := map[string]int64{}
	lifecycle := map[string][]string{}
	for _, e := range evs {
		if e.Type != "assignment" {
			continue
		}
		var a teamAssignment
		if err := e.Decode(&a); err != nil {
			t.Fatal(err)
		}
		lifecycle[a.Assignment] = append(lifecycle[a.Assignment], a.State)
		seq[a.Assignment+" "+a.State] = e.Seq
	}
	for _, id := range []string{"A1", "A2", "A3"} {
		if want := []string{"created", "queued", "running", "reported"}; !slices.Equal(lifecycle[id], want) {
			t.Errorf("%s lifecycle %v; want %v", id, lifecycle[id], want)
		}
	}
	if r1, r2, e1, e2 := seq["A1 running"], seq["A2 running"], seq["A1 reported"], seq["A2 reported"]; !(r1 < e2 && r2 < e1) {
		t.Errorf("A1 ran %d→%d and A2 %d→%d: the running intervals do not overlap", r1, e1, r2, e2)
	}
	if out := subResults(t, evs, "A1", "bash"); len(out) != 1 || !strings.Contains(out[0], "SAW-RIGHT") {
		t.Errorf("A1 never saw A2's file while it ran: %q", out)
	}

	// The merged workspace and the final state of the board.
	for name, want := range map[string]string{"left.txt": "3\n", "right.txt": "4\n", "total.txt": "7\n"} {
		if got := fileContent(t, filepath.Join(dir, "workspace", name)); got != want {
			t.Errorf("workspace/%s = %q; want %q", name, got, want)
		}
	}

	// show and board read the team run.
	code, out, errOut := cli(t, "show", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, s.RunID) {
		t.Errorf("show: exit %d\n%s%s", code, out, errOut)
	}
	for _, id := range []string{"A1", "A2", "A3"} {
		if !strings.Contains(out, id) {
			t.Errorf("show does not mention %s:\n%s", id, out)
		}
	}
	code, out, errOut = cli(t, "board", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, "3 resolved") || !strings.Contains(out, "T3") {
		t.Errorf("board: exit %d\n%s%s", code, out, errOut)
	}
	noCrashText(t, stdout, stderr, out, errOut)
	proofreadTools(t, srv) // the lead's and the subagents' tools
}

type teamResult struct {
	Name    string `json:"name"`
	Output  string `json:"output"`
	IsError bool   `json:"is_error"`
}

// leadResults groups the lead's tool results by tool, in order.
func leadResults(t *testing.T, evs []record.Event) map[string][]teamResult {
	t.Helper()
	out := map[string][]teamResult{}
	for _, e := range evs {
		if e.Type != record.TypeToolResult || e.Agent != "lead" {
			continue
		}
		var r teamResult
		if err := e.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out[r.Name] = append(out[r.Name], r)
	}
	return out
}

// subResults are the outputs of agent's calls of tool name.
func subResults(t *testing.T, evs []record.Event, agent, name string) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Type != record.TypeToolResult || e.Agent != agent {
			continue
		}
		var r teamResult
		if err := e.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Name == name {
			out = append(out, r.Output)
		}
	}
	return out
}
