package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/mcp/mcptest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/runview"
)

// The test binary is also the MCP test server (mcptest), when started so.
var (
	mcpBinOnce sync.Once
	mcpBin     string
)

// mcpServerBin is a copy of the test binary a sandboxed server can run.
func mcpServerBin(t *testing.T) string {
	t.Helper()
	mcpBinOnce.Do(func() { mcpBin = mcptest.Binary(&testing.T{}) })
	return mcpBin
}

// writeConfig writes home/config.toml.
func writeConfig(t *testing.T, home, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mcpEntry is a [mcp_servers.NAME] table for the test server.
func mcpEntry(name, bin, extra string) string {
	return fmt.Sprintf("[mcp_servers.%s]\ncommand = %q\nenv = { %s = \"1\", API_KEY = \"sk-e2e-secret-0451\" }\n%s\n", name, bin, mcptest.EnvServe, extra)
}

func offeredTools(req llmtest.Request) map[string]llmtest.Tool {
	out := map[string]llmtest.Tool{}
	for _, tl := range req.Tools {
		out[tl.Name] = tl
	}
	return out
}

// replyTo is the observation of the call with id in the request's last
// tool replies.
func replyTo(req llmtest.Request, id string) string {
	for _, m := range toolReplies(req) {
		if m.ToolCallID == id {
			return m.Content
		}
	}
	return "<no reply to " + id + ">"
}

func withID(c llm.ToolCall, id string) llm.ToolCall { c.ID = id; return c }

var evidenceID = regexp.MustCompile(`\[evidence (E\d+)`)

// TestMCPToolsInARun is the check from outside: a sandboxed stdio
// server configured in config.toml, a loopback model that calls its tools.
// The tools appear with their schemas next to the built-ins (a server tool
// named read_file does not shadow the built-in); a call returns the
// server's content; the server cannot read the host outside its planes nor
// reach the network; a tool list change is offered on the next turn; the
// server killed mid-run is an observation, not a crash; the record names
// the server and keeps no secret; and replay is identical with the server
// gone.
func TestMCPToolsInARun(t *testing.T) {
	runtest.NeedSandbox(t)
	home, inputs := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("name,value\na,1\n"), 0o644)
	hostDir := t.TempDir()
	os.Chmod(hostDir, 0o755)
	hostFile := filepath.Join(hostDir, "private.txt")
	os.WriteFile(hostFile, []byte("host secret"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			c.Close()
		}
	}()
	bin := mcpServerBin(t)
	writeConfig(t, home, mcpEntry("t", bin, "planes = [\"inputs\"]\ntool_timeout = \"5s\""))

	var mu sync.Mutex
	var problems []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			mu.Lock()
			problems = append(problems, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
	}
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		tools := offeredTools(req)
		switch teamTurn(req) {
		case 0:
			echo, ok := tools["mcp__t__echo"]
			check(ok && echo.Description == "Echo the text back." && strings.Contains(string(echo.Parameters), `"text"`), "mcp__t__echo offered as %+v", echo)
			_, bad := tools["mcp__t__bad_schema"]
			check(!bad, "a tool with an invalid schema is offered")
			_, late := tools["mcp__t__late"]
			check(!late, "late offered before it exists")
			check(tools["read_file"].Description != "Named like a built-in." && tools["mcp__t__read_file"].Description == "Named like a built-in.", "read_file shadowed: %+v", tools["read_file"])
			return calls(withID(call("mcp__t__echo", map[string]any{"text": "hello"}), "c1"),
				withID(call("mcp__t__fail", map[string]any{}), "c2"),
				withID(call("mcp__t__echo", map[string]any{"text": 5}), "c3"),
				withID(call("mcp__t__read_host", map[string]any{"path": hostFile}), "c4"),
				withID(call("mcp__t__dial", map[string]any{"addr": ln.Addr().String()}), "c5"))
		case 1:
			check(regexp.MustCompile(`^echo: hello\n\[evidence E\d: mcp:t/echo lines 1-1, sha256:`).MatchString(replyTo(req, "c1")), "c1: %q", replyTo(req, "c1"))
			check(strings.Contains(replyTo(req, "c2"), "error: the MCP tool fail (server t) reported an error:\nquota exceeded for project p1"), "c2: %q", replyTo(req, "c2"))
			check(strings.Contains(replyTo(req, "c3"), "error: the arguments of mcp__t__echo do not match its input schema"), "c3: %q", replyTo(req, "c3"))
			check(strings.Contains(replyTo(req, "c4"), "cannot read: open "+hostFile), "c4: %q", replyTo(req, "c4"))
			check(strings.Contains(replyTo(req, "c5"), "cannot connect"), "c5: %q", replyTo(req, "c5"))
			return calls(withID(call("mcp__t__read_host", map[string]any{"path": "/inputs/data.csv"}), "c6"),
				withID(call("mcp__t__add_tool", map[string]any{}), "c7"))
		case 2:
			check(strings.Contains(replyTo(req, "c6"), "read: name,value\na,1"), "c6: %q", replyTo(req, "c6"))
			_, late := tools["mcp__t__late"]
			check(late, "late not offered after the list changed: %v", req.Tools)
			return calls(withID(call("mcp__t__big", map[string]any{"bytes": 50000}), "c8"))
		case 3:
			big := replyTo(req, "c8")
			check(len(big) < 20000 && strings.Contains(big, "bytes cut of 50") && strings.Contains(big, "[evidence E"), "c8: %d bytes: %.200q", len(big), big)
			return calls(withID(call("mcp__t__crash", map[string]any{}), "c9"))
		case 4:
			check(strings.Contains(replyTo(req, "c9"), "error: MCP server t: it exited (exit status 3: mcptest: fatal: out of memory)"), "c9: %q", replyTo(req, "c9"))
			return calls(withID(call("mcp__t__echo", map[string]any{"text": "after"}), "c10"),
				withID(call("read_file", map[string]any{"path": "/inputs/data.csv"}), "c11"))
		case 5:
			check(strings.Contains(replyTo(req, "c10"), "MCP server t is not available: it exited"), "c10: %q", replyTo(req, "c10"))
			check(strings.Contains(replyTo(req, "c11"), "name,value"), "c11: %q", replyTo(req, "c11"))
		}
		return calls(finish("used the MCP tools"))
	})
	args := append(openaiArgs(home, srv), "--inputs", inputs, "--json", "Use the tools of server t")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, p := range problems {
		t.Error(p)
	}
	s := decodeSummary(t, stdout)
	evs := runtest.Events(t, s.RunDir)

	// The record: each call names the server, the tool, the server's
	// reported name and version; the server's states; no secret anywhere.
	results := map[string]record.ToolResult{}
	for _, r := range decodeAll[record.ToolResult](t, evs, record.TypeToolResult) {
		results[r.CallID] = r
	}
	for id, failure := range map[string]string{"c1": "", "c2": "tool_error", "c3": "invalid_arguments", "c8": "", "c9": "exited", "c10": "exited"} {
		r := results[id]
		if r.Meta == nil || r.Meta.MCP == nil || r.Meta.MCP.Server != "t" || r.Meta.MCP.ServerName != "mcptest" || r.Meta.MCP.ServerVersion != mcptest.Version || r.Meta.MCP.Failure != failure {
			t.Errorf("%s: meta %+v", id, r.Meta)
		}
	}
	if r := results["c8"]; r.FullRef == "" || r.FullBytes < 50000 {
		t.Errorf("the big result is not kept whole: %+v", r)
	}
	var states []string
	for _, ms := range decodeAll[record.MCPServer](t, evs, record.TypeMCPServer) {
		states = append(states, ms.State)
		if ms.Sandbox != s.Sandbox || ms.Command != bin || !slices.Contains(ms.EnvKeys, "API_KEY") {
			t.Errorf("mcp_server %+v (run sandbox %s)", ms, s.Sandbox)
		}
	}
	if !slices.Equal(states, []string{"ready", "tools_changed", "exited"}) {
		t.Errorf("server states %v", states)
	}
	var mcpEvidence int
	for _, e := range decodeAll[record.Evidence](t, evs, record.TypeEvidence) {
		if e.Kind == record.EvidenceMCP {
			mcpEvidence++
		}
	}
	if mcpEvidence < 3 {
		t.Errorf("%d MCP evidence entries", mcpEvidence)
	}
	assertNotUnder(t, s.RunDir, "sk-e2e-secret-0451")
	code, out, errOut := cli(t, "export", "--home", home, "--format", "chat", s.RunID)
	if code != 0 || strings.Contains(out, "sk-e2e-secret-0451") {
		t.Errorf("export: exit %d, secret in it %v: %s", code, strings.Contains(out, "sk-e2e-secret-0451"), errOut)
	}

	// Replay with the server gone: identical.
	if err := os.Rename(filepath.Dir(bin), filepath.Dir(bin)+".gone"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(filepath.Dir(bin)+".gone", filepath.Dir(bin))
	code, out, errOut = cli(t, "replay", "--home", home, s.RunID)
	if code != 0 || !strings.Contains(out, "identical") {
		t.Errorf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
}

// assertNotUnder fails when secret is in any file under dir.
func assertNotUnder(t *testing.T, dir, secret string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
				t.Errorf("the secret is in %s", p)
			}
		}
		return nil
	})
}

// An unknown server in task.yaml is exit 2 naming it, before any run.
func TestMCPUnknownServerInTask(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	writeConfig(t, home, "[mcp_servers.docs]\ncommand = \"docs-server\"\n")
	task := filepath.Join(dir, "task.yaml")
	os.WriteFile(task, []byte("objective: look it up\nmcp: [docs, tracker]\n"), 0o644)
	code, _, stderr := cli(t, "run", "--home", home, "--provider", "scripted", "--script", "/nonexistent", "--task", task)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr)
	}
	oneLineMessage(t, stderr, `the MCP server "tracker"`, "not configured", "configured: docs", "[mcp_servers.tracker]")
	if _, err := os.Stat(filepath.Join(home, "runs")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(home, "runs"))
		if len(entries) > 0 {
			t.Errorf("a run was created: %v", entries)
		}
	}
}

// A project's .mcp.json (Claude Code's shape) with a streamable HTTP
// server on loopback, its token from the environment; apodex mcp list
// shows it, a task chooses it, and a server that does not start in time
// leaves the run going with a warning naming it.
func TestMCPConfigJSONAndHTTP(t *testing.T) {
	runtest.NeedSandbox(t)
	home, dir := t.TempDir(), t.TempDir()
	remote := mcptest.NewHTTP(t, "remote-tracker", "tok-e2e-777")
	t.Setenv("TRACKER_TOKEN", "tok-e2e-777")
	bin := mcpServerBin(t)
	cfgPath := filepath.Join(dir, ".mcp.json")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`{"mcpServers": {
	  "tracker": {"type": "http", "url": %q, "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"}},
	  "slow": {"command": %q, "env": {%q: "1", %q: "1"}, "startup_timeout": 1}
	}}`, remote.URL, bin, mcptest.EnvServe, mcptest.EnvHang)), 0o644)

	code, out, errOut := cli(t, "mcp", "list", "--home", home, "--mcp-config", cfgPath)
	if code != 0 {
		t.Fatalf("mcp list: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"tracker", "ready", "remote-tracker " + mcptest.Version, "mcp__tracker__echo", "Echo the text back.", "slow", "failed", "startup_timeout of 1s", "bad_schema"} {
		if !strings.Contains(out, want) {
			t.Errorf("mcp list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tok-e2e-777") {
		t.Error("mcp list prints the token")
	}

	task := filepath.Join(dir, "task.yaml")
	os.WriteFile(task, []byte("objective: find the issue\nmcp: [tracker, slow]\n"), 0o644)
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if teamTurn(req) == 0 {
			return calls(withID(call("mcp__tracker__echo", map[string]any{"text": "issue 29"}), "h1"))
		}
		if got := replyTo(req, "h1"); !strings.HasPrefix(got, "echo: issue 29") {
			t.Errorf("h1: %q", got)
		}
		return calls(finish("found it"))
	})
	args := append(openaiArgs(home, srv), "--task", task, "--mcp-config", cfgPath, "--json")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	evs := runtest.Events(t, s.RunDir)
	var warned bool
	for _, w := range decodeAll[record.Warning](t, evs, record.TypeWarning) {
		warned = warned || w.Code == "mcp" && strings.Contains(w.Message, "MCP server slow did not start") && strings.Contains(w.Message, "startup_timeout")
	}
	if !warned {
		t.Error("no warning names the server that did not start")
	}
	for _, ms := range decodeAll[record.MCPServer](t, evs, record.TypeMCPServer) {
		if ms.Name == "tracker" && (ms.URL != remote.URL || !slices.Equal(ms.HeaderNames, []string{"Authorization"}) || ms.State != "ready") {
			t.Errorf("tracker recorded as %+v", ms)
		}
	}
	var st record.RunStarted
	evs[0].Decode(&st)
	if !slices.Equal(st.Settings.MCP, []string{"slow", "tracker"}) {
		t.Errorf("settings.mcp %v", st.Settings.MCP)
	}
	assertNotUnder(t, s.RunDir, "tok-e2e-777")
}

// The lead hands an MCP tool to a subagent by name; one it does not have
// is refused naming the tools it may give.
func TestMCPToolHandedToSubagent(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	writeConfig(t, home, mcpEntry("t", mcpServerBin(t), ""))
	roles := map[string]string{"echoer": "A1"}
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		id, turn := teamAgentOf(req, roles), teamTurn(req)
		if id == "A1" {
			if turn == 0 {
				_, has := offeredTools(req)["mcp__t__echo"]
				_, other := offeredTools(req)["mcp__t__add"]
				if !has || other {
					t.Errorf("the subagent's tools: %v", req.Tools)
				}
				return calls(withID(call("mcp__t__echo", map[string]any{"text": "from A1"}), "s1"))
			}
			reply := replyTo(req, "s1")
			var ev []string
			if m := evidenceID.FindStringSubmatch(reply); m != nil {
				ev = []string{m[1]}
			} else {
				t.Errorf("s1 has no evidence id: %q", reply)
			}
			return calls(call("report", map[string]any{"summary": reply, "claims": []any{map[string]any{"text": "the server echoed", "evidence": ev}}}))
		}
		switch turn {
		case 0:
			return calls(call("board_add", map[string]any{"title": "Echo", "objective": "Echo through the server"}))
		case 1:
			return calls(withID(call("dispatch", map[string]any{"item": "T1", "role": "echoer", "instructions": "Call mcp__t__echo with 'from A1' and report.", "tools": []string{"mcp__t__nope"}}), "d1"))
		case 2:
			if got := replyTo(req, "d1"); !strings.Contains(got, `tool "mcp__t__nope" cannot be given`) || !strings.Contains(got, "mcp__t__echo") {
				t.Errorf("d1: %q", got)
			}
			return calls(call("dispatch", map[string]any{"item": "T1", "role": "echoer", "instructions": "Call mcp__t__echo with 'from A1' and report.", "tools": []string{"mcp__t__echo"}}))
		}
		if !teamSeen(req, "Assignment A1 (") {
			return calls(call("wait", map[string]any{"timeout_s": 30}))
		}
		if teamCalled(req, "board_resolve") == 0 {
			if !teamSeen(req, "echo: from A1") {
				t.Errorf("the lead did not read the subagent's MCP result")
			}
			return calls(call("board_resolve", map[string]any{"id": "T1", "note": "the server echoed", "refs": []string{"report:A1"}}))
		}
		return calls(finish("done"))
	})
	args := append(openaiArgs(home, srv), "--mode", "team", "--effort", "off", "--synthesis", "off", "--json", "Echo through the MCP server")
	code, stdout, stderr := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	var seen bool
	for _, e := range runtest.Events(t, s.RunDir) {
		if e.Type == record.TypeToolResult && e.Agent == "A1" {
			var r record.ToolResult
			e.Decode(&r)
			seen = seen || r.Meta != nil && r.Meta.MCP != nil && r.Meta.MCP.Server == "t" && strings.HasPrefix(r.Output, "echo: from A1")
		}
	}
	if !seen {
		t.Error("no MCP result of A1 in the record")
	}
}

// Resume starts the run's MCP servers again from the configuration (one no
// longer configured is refused, exit 2 naming it), and the resumed agent
// calls them.
func TestMCPResumeRestartsServers(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	entry := mcpEntry("t", mcpServerBin(t), "")
	writeConfig(t, home, entry)
	first := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if n == 0 {
			return calls(withID(call("mcp__t__echo", map[string]any{"text": "before"}), "r1"))
		}
		return llmtest.Turn{Status: 400}
	})
	code, stdout, stderr := cli(t, append(openaiArgs(home, first), "--json", "Echo twice")...)
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := decodeSummary(t, stdout)
	if s.Termination != "model_error" {
		t.Fatalf("termination %s", s.Termination)
	}
	second := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		if teamTurn(req) == 1 {
			if !strings.HasPrefix(replyTo(req, "r1"), "echo: before") {
				t.Errorf("r1 in the resumed history: %q", replyTo(req, "r1"))
			}
			return calls(withID(call("mcp__t__echo", map[string]any{"text": "after"}), "r2"))
		}
		if got := replyTo(req, "r2"); !strings.HasPrefix(got, "echo: after") {
			t.Errorf("r2 after the resume: %q", got)
		}
		return calls(finish("echoed twice"))
	})
	writeConfig(t, home, "")
	code, _, stderr = cli(t, "resume", "--home", home, "--base-url", second.URL, "--quiet", s.RunID)
	if code != 2 {
		t.Fatalf("resume without the server configured: exit %d: %s", code, stderr)
	}
	oneLineMessage(t, stderr, "MCP server(s) t", "[mcp_servers.t]")

	writeConfig(t, home, entry)
	code, stdout, stderr = cli(t, "resume", "--home", home, "--base-url", second.URL, "--json", s.RunID)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var after bool
	var states []string
	for _, e := range runtest.Events(t, s.RunDir) {
		switch e.Type {
		case record.TypeResumed:
			after = true
		case record.TypeMCPServer:
			var ms record.MCPServer
			e.Decode(&ms)
			states = append(states, fmt.Sprintf("%v:%s", after, ms.State))
		}
	}
	if !slices.Equal(states, []string{"false:ready", "true:ready"}) {
		t.Errorf("server states around the resume: %v", states)
	}
}

// TestMCPServe drives `apodex mcp serve` (the test binary as the CLI,
// over stdio) with an MCP client, as Codex CLI or Claude Code would: it
// starts a run from a task file, reads its status, sends it a message the
// coordinator reads before its next model call, waits for it with a
// progress notification per step, and gets its verified outcome and a
// delivered file. A second run goes on to its end after the server was
// killed. Over --http, a request without the printed token is refused.
func TestMCPServe(t *testing.T) {
	runtest.NeedSandbox(t)
	home, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "data.csv"), []byte("name,value\na,1\nb,2\n"), 0o644)
	task := filepath.Join(dir, "task.yaml")
	os.WriteFile(task, []byte(`objective: Write the sum of the value column of /inputs/data.csv to /outputs/sum.txt
inputs: ./data
deliverables:
  - path: /outputs/sum.txt
    non_empty: true
verify:
  - kind: recompute
    command: awk -F, 'NR>1{s+=$2} END{print s}' /inputs/data.csv
    compare: /outputs/sum.txt
`), 0o644)
	messaged, released := make(chan struct{}), make(chan struct{})
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		second := strings.Contains(req.Messages[1].Content, "second job")
		switch turn := teamTurn(req); {
		case second && turn == 0:
			select { // the server is killed while the run waits here
			case <-released:
			case <-time.After(30 * time.Second):
				t.Error("the second run was never released")
			}
			return calls(call("write_file", map[string]any{"path": "/workspace/second.txt", "content": "done\n"}))
		case second:
			return calls(finish("second job done"))
		case turn == 0:
			return calls(call("claim_outputs", map[string]any{"paths": []string{"/outputs/sum.txt"}}))
		case turn == 1:
			select { // the client sends its message while the run waits here
			case <-messaged:
			case <-time.After(30 * time.Second):
				t.Error("no message was sent")
			}
			return calls(bash("awk -F, 'NR>1{s+=$2} END{print s}' /inputs/data.csv > /outputs/sum.txt"))
		case turn == 2:
			var seen bool
			for _, m := range req.Messages {
				seen = seen || m.Role == "user" && strings.Contains(m.Content, "count the rows too")
			}
			if !seen {
				t.Error("the message sent through MCP did not reach the coordinator")
			}
		}
		return calls(finish("sum.txt holds 3"))
	})
	cmd := exec.Command(os.Args[0], "mcp", "serve", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m")
	cmd.Env = append(os.Environ(), "APODEX_TEST_CLI=1")
	c := mcptest.Dial(t, cmd)
	ctx := context.Background()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"start_run", "run_status", "send_message", "wait_run", "run_outputs"} {
		if tools[name] == "" {
			t.Errorf("tool %s missing: %v", name, tools)
		}
	}
	mustCall := func(name string, args map[string]any, progress func(string)) string {
		t.Helper()
		text, isErr, err := c.Call(ctx, name, args, progress)
		if err != nil || isErr {
			t.Fatalf("%s: %q %v", name, text, err)
		}
		return text
	}
	var started struct{ RunID, RunDir string }
	raw := mustCall("start_run", map[string]any{"task": task}, nil)
	if err := json.Unmarshal([]byte(raw), &struct {
		RunID  *string `json:"run_id"`
		RunDir *string `json:"run_dir"`
	}{&started.RunID, &started.RunDir}); err != nil || started.RunID == "" {
		t.Fatalf("start_run: %q %v", raw, err)
	}
	if st := mustCall("run_status", map[string]any{"run_id": started.RunID}, nil); !strings.Contains(st, "running") {
		t.Errorf("run_status: %q", st)
	}
	if got := mustCall("send_message", map[string]any{"run_id": started.RunID, "text": "Please count the rows too."}, nil); !strings.HasPrefix(got, "queued as M1") {
		t.Errorf("send_message: %q", got)
	}
	close(messaged)
	var mu sync.Mutex
	var steps []string
	raw = mustCall("wait_run", map[string]any{"run_id": started.RunID}, func(m string) { mu.Lock(); steps = append(steps, m); mu.Unlock() })
	var outcome struct {
		Status       string `json:"status"`
		Verification []struct {
			Passed bool `json:"passed"`
		} `json:"verification"`
		Delivery struct {
			OK bool `json:"ok"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal([]byte(raw), &outcome); err != nil || outcome.Status != "completed" || !outcome.Delivery.OK || len(outcome.Verification) == 0 {
		t.Fatalf("wait_run: %v\n%s", err, raw)
	}
	for _, v := range outcome.Verification {
		if !v.Passed {
			t.Errorf("verification failed: %s", raw)
		}
	}
	time.Sleep(100 * time.Millisecond) // progress notifications are handled on their own goroutines
	mu.Lock()
	joined := strings.Join(steps, "\n")
	mu.Unlock()
	if !strings.Contains(joined, "bash") || !strings.Contains(joined, "claim_outputs") {
		t.Errorf("progress notifications:\n%s", joined)
	}
	if got := mustCall("run_outputs", map[string]any{"run_id": started.RunID, "path": "/outputs/sum.txt"}, nil); got != "3\n" {
		t.Errorf("run_outputs sum.txt: %q", got)
	}
	if _, isErr, _ := c.Call(ctx, "run_outputs", map[string]any{"run_id": started.RunID, "path": "/etc/passwd"}, nil); !isErr {
		t.Error("run_outputs read outside the run's planes")
	}

	// A run that cannot start says why (its process's error).
	missing := filepath.Join(dir, "no-such-dir")
	if text, isErr, err := c.Call(ctx, "start_run", map[string]any{"objective": "x", "inputs": missing}, nil); err != nil || !isErr || !strings.Contains(text, "the run did not start") || !strings.Contains(text, missing) {
		t.Errorf("start_run with missing inputs: %q %v %v", text, isErr, err)
	}

	// The server is killed while a run is going (a host ending its MCP
	// servers does that): the run is a process of its own, still live,
	// and goes on to its end.
	raw = mustCall("start_run", map[string]any{"objective": "The second job: write /workspace/second.txt"}, nil)
	var second struct {
		RunDir string `json:"run_dir"`
	}
	json.Unmarshal([]byte(raw), &second)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Wait()
	if got := runview.Liveness(second.RunDir); got != runview.Live {
		t.Errorf("the second run after the server was killed: %s, want live", got)
	}
	close(released)
	waitFinished(t, second.RunDir)
	evs := runtest.Events(t, second.RunDir)
	var fin record.RunFinished
	if last := evs[len(evs)-1]; last.Type != record.TypeRunFinished || last.Decode(&fin) != nil || fin.Status != "completed" {
		t.Fatalf("the second run's record ends with %s %+v", last.Type, fin)
	}
	if got := fileContent(t, filepath.Join(second.RunDir, "workspace", "second.txt")); got != "done\n" {
		t.Errorf("second.txt %q", got)
	}
}

// waitFinished waits (up to a minute) until the run in dir has finished.
func waitFinished(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); runview.Liveness(dir) != runview.Finished; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish: %s", filepath.Base(dir), runview.Liveness(dir))
		}
	}
}

func TestMCPServeHTTPNeedsTheToken(t *testing.T) {
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn { return calls(finish("x")) })
	if code, _, stderr := cli(t, "mcp", "serve", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m", "--http", "0.0.0.0:0"); code != 2 || !strings.Contains(stderr, "loopback") {
		t.Errorf("a non-loopback address: exit %d %s", code, stderr)
	}
	cmd := exec.Command(os.Args[0], "mcp", "serve", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "APODEX_TEST_CLI=1")
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	line, err := bufio.NewReader(errPipe).ReadString('\n')
	m := regexp.MustCompile(`on (http://\S+/) .*Bearer (\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("first line %q %v", line, err)
	}
	if _, err := mcptest.DialHTTP(t, m[1], "not-the-token"); err == nil {
		t.Error("a wrong token was let in")
	}
	c, err := mcptest.DialHTTP(t, m[1], m[2])
	if err != nil {
		t.Fatal(err)
	}
	if tools, err := c.Tools(context.Background()); err != nil || tools["start_run"] == "" {
		t.Errorf("tools over HTTP: %v %v", tools, err)
	}
}
