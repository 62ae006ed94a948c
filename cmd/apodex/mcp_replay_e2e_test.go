package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// evidenceBySource maps each evidence event's source to its id.
func evidenceBySource(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range decodeAll[record.Evidence](t, runtest.Events(t, dir), record.TypeEvidence) {
		out[e.Source] = e.ID
	}
	return out
}

// TestMCPReplayEvidenceOrder: one turn with a slow MCP call and read_file
// calls; in the run the reads get their ids first, in the replay the MCP
// result is served at once from the record; the replay still gives every
// text the id it had.
func TestMCPReplayEvidenceOrder(t *testing.T) {
	runtest.NeedSandbox(t)
	home, inputs := t.TempDir(), t.TempDir()
	var reads []llm.ToolCall
	for i := range 4 {
		name := fmt.Sprintf("f%d.txt", i)
		os.WriteFile(filepath.Join(inputs, name), []byte(strings.Repeat(fmt.Sprintf("line of %s\n", name), 1+i*2000)), 0o644)
		reads = append(reads, withID(call("read_file", map[string]any{"path": "/inputs/" + name}), fmt.Sprintf("r%d", i)))
	}
	writeConfig(t, home, mcpEntry("t", mcpServerBin(t), "tool_timeout = \"20s\""))
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if teamTurn(req) == 0 {
			return calls(append([]llm.ToolCall{withID(call("mcp__t__slow", map[string]any{"seconds": 0.5}), "s1"),
				withID(call("mcp__t__echo", map[string]any{"text": "fast"}), "e1")}, reads...)...)
		}
		return calls(finish("read them"))
	})
	code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--inputs", inputs, "--json", "Read the inputs and ask server t")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	orig := evidenceBySource(t, s.RunDir)
	if orig["mcp:t/slow"] != "E6" || len(orig) != 6 {
		t.Fatalf("the original's evidence: %v (the slow MCP result should be last, E6)", orig)
	}
	code, out, errOut := cli(t, "replay", "--home", home, "--keep", "--json", s.RunID)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep struct {
		Identical bool   `json:"identical"`
		ReplayDir string `json:"replay_dir"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.ReplayDir == "" {
		t.Fatalf("replay --json: %v\n%s", err, out)
	}
	defer os.RemoveAll(filepath.Dir(filepath.Dir(rep.ReplayDir))) // the replay's home
	again := evidenceBySource(t, rep.ReplayDir)
	for src, id := range orig {
		if again[src] != id {
			t.Errorf("%s: %s in the run, %s in the replay", src, id, again[src])
		}
	}
	if !rep.Identical {
		t.Errorf("replay not identical:\n%s", out)
	}
}

// TestMCPWritable from outside: a server whose entry says writable =
// ["workspace/reports"] writes there and nowhere else, its call's file
// changes are in the record, and a replay with the server gone makes the
// same files (identical); a server without writable cannot write the
// workspace it sees.
func TestMCPWritable(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	bin := mcpServerBin(t)
	writeConfig(t, home, mcpEntry("ro", bin, "planes = [\"workspace\"]")+mcpEntry("rw", bin, "planes = [\"workspace\"]\nwritable = [\"workspace/reports\"]"))
	write := func(srv, id, path string) llm.ToolCall {
		return withID(call("mcp__"+srv+"__write_host", map[string]any{"path": path, "text": "from " + srv + "\n"}), id)
	}
	var replies = map[string]string{}
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		switch teamTurn(req) {
		case 0:
			return calls(write("ro", "w1", "/workspace/ro.txt"), write("rw", "w2", "/workspace/rw.txt"))
		case 1:
			replies["w1"], replies["w2"] = replyTo(req, "w1"), replyTo(req, "w2")
			return calls(write("rw", "w3", "/workspace/reports/summary.md"))
		case 2:
			replies["w3"] = replyTo(req, "w3")
		}
		return calls(finish("wrote the report"))
	})
	code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--json", "Write the report with server rw")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	for id, want := range map[string]string{"w1": "read-only file system", "w2": "read-only file system", "w3": "wrote /workspace/reports/summary.md"} {
		if !strings.Contains(replies[id], want) {
			t.Errorf("%s: %q, want %q", id, replies[id], want)
		}
	}
	ws := filepath.Join(s.RunDir, "workspace")
	if got := fileContent(t, filepath.Join(ws, "reports", "summary.md")); got != "from rw\n" {
		t.Errorf("summary.md %q", got)
	}
	for _, name := range []string{"ro.txt", "rw.txt"} {
		if _, err := os.Stat(filepath.Join(ws, name)); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	evs := runtest.Events(t, s.RunDir)
	var deltas []string
	for _, d := range decodeAll[record.FileDelta](t, evs, record.TypeFileDelta) {
		deltas = append(deltas, d.CallID+" "+d.Path)
	}
	if strings.Join(deltas, ",") != "w3 /workspace/reports/summary.md" {
		t.Errorf("file deltas %v", deltas)
	}
	for _, ms := range decodeAll[record.MCPServer](t, evs, record.TypeMCPServer) {
		if want := map[string]string{"ro": "", "rw": "/workspace/reports"}[ms.Name]; strings.Join(ms.Writable, ",") != want {
			t.Errorf("mcp_server %s writable %v", ms.Name, ms.Writable)
		}
	}
	// What the model could call is in run_started; show, log and config
	// show list the servers.
	var st record.RunStarted
	evs[0].Decode(&st)
	var offered []string
	for _, m := range st.MCP {
		for _, tl := range m.Tools {
			offered = append(offered, m.Server+":"+tl.Tool+"="+tl.Name)
		}
	}
	if !slices.Contains(st.Tools, "mcp__rw__write_host") || !slices.Contains(offered, "rw:write_host=mcp__rw__write_host") || len(st.MCP) != 2 || st.MCP[0].State != "ready" {
		t.Errorf("run_started: tools %v, mcp %+v", st.Tools, st.MCP)
	}
	if code, out, _ := cli(t, "show", "--home", home, s.RunID); code != 0 || !regexp.MustCompile(`mcp server:  rw \(stdio, ready, mcptest \S+\): \d+ tools mcp__rw__add`).MatchString(out) {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	if code, out, _ := cli(t, "log", "--home", home, s.RunID); code != 0 || !strings.Contains(out, "MCP server") || !strings.Contains(out, "rw ready") {
		t.Errorf("log: exit %d\n%s", code, out)
	}
	code, out, _ := cli(t, "config", "show", "--home", home)
	if code != 0 || !regexp.MustCompile(`mcp_servers.rw +stdio \S+/mcp-server; env API_KEY, APODEX_MCPTEST_SERVE; sandboxed, network off, reads /workspace, writes /workspace/reports +file `).MatchString(out) ||
		!strings.Contains(out, "reads /workspace, writes nothing") || strings.Contains(out, "sk-e2e-secret-0451") {
		t.Errorf("config show: exit %d\n%s", code, out)
	}

	if err := os.Rename(filepath.Dir(bin), filepath.Dir(bin)+".gone"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(filepath.Dir(bin)+".gone", filepath.Dir(bin))
	code, out, errOut := cli(t, "replay", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, "identical") {
		t.Errorf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestMCPDoctorAndList: doctor checks each configured server (one that
// exits at once fails, with the entry to fix; one with a tool left out
// warns); mcp list starts a server
// whose entry says writable without a run to write to.
func TestMCPDoctorAndList(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	bin := mcpServerBin(t)
	writeConfig(t, home, mcpEntry("good", bin, "writable = [\"workspace/out\"]")+
		fmt.Sprintf("[mcp_servers.dies]\ncommand = %q\nenv = { %s = \"1\", MCPTEST_EXIT = \"1\" }\n", bin, "APODEX_MCPTEST_SERVE"))
	code, out, errOut := cli(t, "mcp", "list", "--home", home, "good")
	if code != 0 || !strings.Contains(out, "good  ready") || !strings.Contains(out, "mcp__good__write_host") {
		t.Errorf("mcp list: exit %d\n%s\n%s", code, out, errOut)
	}
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn {
		return calls(call("report", map[string]any{"status": "ok"}))
	})
	srv.SetModels("m")
	code, out, _ = cli(t, "doctor", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m")
	if code != 1 || !regexpLine(out, `warn\s+mcp\s+good: mcptest \S+, \d+ tools \(stdio\)`) || !regexpLine(out, `FAIL\s+mcp\s+dies: it exited before answering`) ||
		!strings.Contains(out, "fix its entry in "+filepath.Join(home, "config.toml")) {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
}

// TestMCPWritableSubagentReplay: in a team run a subagent calls a server
// that may write; the file lands in the run's workspace, and the replay,
// with the server gone, writes it again (identical).
func TestMCPWritableSubagentReplay(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	bin := mcpServerBin(t)
	writeConfig(t, home, mcpEntry("rw", bin, "writable = [\"workspace/reports\"]"))
	roles := map[string]string{"writer": "A1"}
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		id, turn := teamAgentOf(req, roles), teamTurn(req)
		if id == "A1" {
			switch turn {
			case 0: // its own copy first: the agent's view differs from the server's
				return calls(call("write_file", map[string]any{"path": "/workspace/reports/a1.md", "content": "draft\n"}))
			case 1:
				return calls(withID(call("mcp__rw__write_host", map[string]any{"path": "/workspace/reports/a1.md", "text": "by A1\n"}), "s1"))
			}
			return calls(call("report", map[string]any{"summary": replyTo(req, "s1")}))
		}
		switch turn {
		case 0:
			return calls(call("board_add", map[string]any{"title": "Write", "objective": "Write the report through the server"}))
		case 1:
			return calls(call("dispatch", map[string]any{"item": "T1", "role": "writer", "instructions": "Write it with mcp__rw__write_host and report.", "tools": []string{"mcp__rw__write_host"}}))
		}
		if !teamSeen(req, "Assignment A1 (") {
			return calls(call("wait", map[string]any{"timeout_s": 30}))
		}
		if teamCalled(req, "board_resolve") == 0 {
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "written", "refs": []string{"report:A1"}}))
		}
		return calls(finish("done"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--effort", "off", "--synthesis", "off", "--json", "Write the report through the MCP server")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	if got := fileContent(t, filepath.Join(s.RunDir, "workspace", "reports", "a1.md")); got != "by A1\n" {
		t.Errorf("a1.md %q", got)
	}
	if err := os.Rename(filepath.Dir(bin), filepath.Dir(bin)+".gone"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(filepath.Dir(bin)+".gone", filepath.Dir(bin))
	code, out, errOut := cli(t, "replay", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, "identical") {
		t.Errorf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
}
