package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/mcp/mcptest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binPath string
)

// server is the test server's entry: the copied test binary, serving.
func testServer(t *testing.T, name string, env map[string]string) config.MCPServer {
	t.Helper()
	binOnce.Do(func() { binPath = mcptest.Binary(&testing.T{}) })
	e := map[string]string{mcptest.EnvServe: "1"}
	for k, v := range env {
		e[k] = v
	}
	return config.MCPServer{Name: name, Command: binPath, Env: e}
}

type fixture struct {
	dir    string
	log    *record.Log
	cites  []string
	mu     sync.Mutex
	warns  []string
	runner sandbox.Runner
	kind   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	log, err := record.Create(dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	r, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Fatalf("no sandbox: %v", err)
	}
	return &fixture{dir: dir, log: log, runner: r, kind: sandbox.KindOf(r)}
}

func (f *fixture) env() Env {
	return Env{Runner: f.runner, SandboxKind: f.kind, Log: f.log, Version: "test",
		Getenv: func(k string) string {
			return map[string]string{"TRACKER_TOKEN": "tok-123", "PATH": "/usr/bin:/bin"}[k]
		},
		Cite: func(_ context.Context, source, text string) (string, string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.cites = append(f.cites, source)
			id := fmt.Sprintf("E%d", len(f.cites))
			return id, fmt.Sprintf("[evidence %s: %s]", id, source)
		},
		Warn: func(m string) { f.mu.Lock(); f.warns = append(f.warns, m); f.mu.Unlock() },
	}
}

func (f *fixture) events(t *testing.T, typ string) []record.Event {
	t.Helper()
	c, err := record.Read(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Event
	for _, e := range c.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func callCtx(agent, id string) context.Context {
	return tool.WithCallID(llm.WithCaller(context.Background(), llm.Caller{Agent: agent}), id)
}

// call calls the named tool of the hub as agent's call id.
func call(t *testing.T, h *Hub, name, args, id string) tool.Result {
	t.Helper()
	set := tool.NewSet(h.Tools()...)
	tl, ok := set.Get(name)
	if !ok {
		t.Fatalf("%s is not offered; offered: %v", name, set.Names())
	}
	return tl.Call(callCtx("main", id), json.RawMessage(args))
}

// A sandboxed stdio server's tools are offered as mcp__NAME__TOOL with its
// descriptions and schemas; each kind of content comes back as text; the
// record names the server and its reported name and version, and keeps
// no secret.
func TestStdioServerTools(t *testing.T) {
	f := newFixture(t)
	srv := testServer(t, "t", map[string]string{"API_KEY": "sk-very-secret-value"})
	srv.ToolTimeout = 2 * time.Second
	h := Start(context.Background(), []config.MCPServer{srv}, f.env())
	defer h.Close()

	names := h.Names()
	for _, want := range []string{"mcp__t__echo", "mcp__t__add", "mcp__t__image", "mcp__t__read_file", "mcp__t__crash"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s not offered: %v", want, names)
		}
	}
	if slices.Contains(names, "mcp__t__bad_schema") {
		t.Error("a tool with an invalid schema is offered")
	}
	st := h.Status()[0]
	if st.State != record.MCPReady || st.ServerName != "mcptest" || st.ServerVersion != mcptest.Version || st.Sandbox != f.kind {
		t.Fatalf("status %+v", st.MCPServer)
	}
	if len(st.LeftOut) != 1 || !strings.HasPrefix(st.LeftOut[0], "bad_schema: its input schema is not valid JSON Schema") {
		t.Errorf("left out %v", st.LeftOut)
	}
	if !slices.ContainsFunc(f.warns, func(w string) bool { return strings.Contains(w, "bad_schema") }) {
		t.Errorf("no warning for the invalid schema: %v", f.warns)
	}
	set := tool.NewSet(h.Tools()...)
	echo, _ := set.Get("mcp__t__echo")
	var params map[string]any
	json.Unmarshal(echo.Spec().Parameters, &params)
	if echo.Spec().Description != "Echo the text back." || params["type"] != "object" {
		t.Errorf("echo spec %+v", echo.Spec())
	}

	for _, c := range []struct {
		tool, args string
		want       []string
		failure    string
	}{
		{"echo", `{"text": "hi there"}`, []string{"echo: hi there\n[evidence E1: mcp:t/echo]"}, ""},
		{"add", `{"a": 1, "b": 2}`, []string{`{"sum":3}`}, ""},
		{"image", `{}`, []string{"the chart:\n[image: image/png, 70 bytes]"}, ""},
		{"resource", `{}`, []string{"[resource file:///notes.md: text/markdown, 25 bytes]\n# Notes\nThe answer is 42.", "[resource link: https://example.test/report.pdf (report, application/pdf, 2.0 KiB)]"}, ""},
		{"fail", `{}`, []string{"error: the MCP tool fail (server t) reported an error:\nquota exceeded for project p1"}, "tool_error"},
		{"echo", `{"text": 5}`, []string{"error: the arguments of mcp__t__echo do not match its input schema"}, "invalid_arguments"},
		{"slow", `{"seconds": 30}`, []string{"error: MCP server t: no answer within its tool_timeout of 2s"}, "timeout"},
		{"read_file", `{"path": "/etc/passwd"}`, []string{"the server's read_file of /etc/passwd"}, ""},
		{"has_env", `{"name": "API_KEY"}`, []string{"API_KEY is set: true (20 bytes)"}, ""},
	} {
		r := call(t, h, "mcp__t__"+c.tool, c.args, "c-"+c.tool)
		for _, w := range c.want {
			if !strings.Contains(r.Output, w) {
				t.Errorf("%s %s: output %q lacks %q", c.tool, c.args, r.Output, w)
			}
		}
		m := r.Meta.MCP
		if r.IsError != (c.failure != "") || m == nil || m.Failure != c.failure || m.Server != "t" || m.Tool != c.tool || m.ServerName != "mcptest" || m.ServerVersion != mcptest.Version {
			t.Errorf("%s: error %v, meta %+v", c.tool, r.IsError, m)
		}
	}
	if r := call(t, h, "mcp__t__add", `{"a": 1, "b": 2}`, "c2"); strings.Count(r.Output, "3") != 1 {
		t.Errorf("structured content repeated: %q", r.Output)
	}

	// Over the observation cap: the model reads a cut that says so, the
	// record keeps the whole.
	r := call(t, h, "mcp__t__big", `{"bytes": 100000}`, "c-big")
	if len(r.Output) > tool.DefaultObservationLimit+200 || !strings.Contains(r.Output, "bytes cut of") || len(r.Full) < 100000 || r.Meta.MCP.Bytes != 100000 {
		t.Errorf("big: output %d bytes, full %d, meta %+v", len(r.Output), len(r.Full), r.Meta.MCP)
	}

	h.Close()
	ev := f.events(t, record.TypeMCPServer)
	var ms record.MCPServer
	ev[0].Decode(&ms)
	if ms.State != record.MCPReady || ms.Command != binPath || !slices.Contains(ms.EnvKeys, "API_KEY") || ms.ToolsRef == "" {
		t.Errorf("mcp_server %+v", ms)
	}
	assertNoSecret(t, f.dir, "sk-very-secret-value")
}

// assertNoSecret fails when secret is in any file under dir.
func assertNoSecret(t *testing.T, dir, secret string) {
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

// A sandboxed server sees neither the host outside its planes nor the
// network; the planes it is given it reads, never writes. sandbox = false
// is the recorded opt-out.
func TestStdioServerIsolation(t *testing.T) {
	f := newFixture(t)
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "secret.txt"), []byte("host file"), 0o644)
	os.Chmod(host, 0o755)
	inputs := t.TempDir()
	os.Chmod(inputs, 0o755)
	os.WriteFile(filepath.Join(inputs, "data.csv"), []byte("a,b\n1,2\n"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	boxed := testServer(t, "box", nil)
	boxed.Planes = []string{"/inputs"}
	open := testServer(t, "open", nil)
	open.NoSandbox = true
	env := f.env()
	env.Planes = map[string]string{"/inputs": inputs}
	h := Start(context.Background(), []config.MCPServer{boxed, open}, env)
	defer h.Close()

	for _, c := range []struct{ tool, args, want string }{
		{"mcp__box__read_host", fmt.Sprintf(`{"path": %q}`, filepath.Join(host, "secret.txt")), "cannot read"},
		{"mcp__box__read_host", `{"path": "/inputs/data.csv"}`, "read: a,b\n1,2"},
		{"mcp__box__dial", fmt.Sprintf(`{"addr": %q}`, ln.Addr().String()), "cannot connect"},
		{"mcp__open__read_host", fmt.Sprintf(`{"path": %q}`, filepath.Join(host, "secret.txt")), "read: host file"},
		{"mcp__open__dial", fmt.Sprintf(`{"addr": %q}`, ln.Addr().String()), "connected"},
		{"mcp__box__uid", `{}`, fmt.Sprintf("uid %d\n", sandbox.CommandUID())},
		{"mcp__open__uid", `{}`, fmt.Sprintf("uid %d\n", os.Getuid())},
	} {
		if r := call(t, h, c.tool, c.args, "x"); !strings.Contains(r.Output, c.want) {
			t.Errorf("%s %s: %q, want %q", c.tool, c.args, r.Output, c.want)
		}
	}
	got := map[string]string{}
	for _, s := range h.Status() {
		got[s.Name] = s.Sandbox
	}
	if got["box"] != f.kind || got["open"] != "none" {
		t.Errorf("recorded sandboxes %v", got)
	}
}

// A server that does not start in time, or exits at once, is failed with
// the reason; one that dies or sends garbage mid-run gives an observation
// saying which, and the other servers go on.
func TestServerFailures(t *testing.T) {
	f := newFixture(t)
	hang := testServer(t, "hang", map[string]string{mcptest.EnvHang: "1"})
	hang.StartupTimeout = time.Second
	exit := testServer(t, "exit", map[string]string{mcptest.EnvExit: "1"})
	crash := testServer(t, "crash", nil)
	junk := testServer(t, "junk", nil)
	ok := testServer(t, "ok", nil)
	h := Start(context.Background(), []config.MCPServer{hang, exit, crash, junk, ok}, f.env())
	defer h.Close()

	st := map[string]Status{}
	for _, s := range h.Status() {
		st[s.Name] = s
	}
	if s := st["hang"]; s.State != record.MCPFailed || !strings.Contains(s.Error, "within its startup_timeout of 1s") {
		t.Errorf("hang: %+v", s.MCPServer)
	}
	if s := st["exit"]; s.State != record.MCPFailed || !strings.Contains(s.Error, "exited before answering (exit status 4: mcptest: cannot open the database: permission denied)") {
		t.Errorf("exit: %+v", s.MCPServer)
	}
	for _, n := range h.Names() {
		if strings.HasPrefix(n, "mcp__hang__") || strings.HasPrefix(n, "mcp__exit__") {
			t.Errorf("a failed server's tool is offered: %s", n)
		}
	}

	r := call(t, h, "mcp__crash__crash", `{}`, "c1")
	if !r.IsError || r.Meta.MCP.Failure != "exited" || !strings.Contains(r.Output, "MCP server crash: it exited (exit status 3: mcptest: fatal: out of memory)") {
		t.Errorf("crash: %q %+v", r.Output, r.Meta.MCP)
	}
	r = call(t, h, "mcp__crash__echo", `{"text": "again"}`, "c2")
	if !r.IsError || r.Meta.MCP.Failure != "exited" || !strings.Contains(r.Output, "MCP server crash is not available: it exited") {
		t.Errorf("after the crash: %q %+v", r.Output, r.Meta.MCP)
	}
	r = call(t, h, "mcp__junk__garbage", `{}`, "c3")
	if !r.IsError || r.Meta.MCP.Failure != "invalid_response" || !strings.Contains(r.Output, "MCP server junk: it sent what is not valid JSON-RPC") {
		t.Errorf("garbage: %q %+v", r.Output, r.Meta.MCP)
	}
	if r := call(t, h, "mcp__ok__echo", `{"text": "still here"}`, "c4"); r.IsError || !strings.Contains(r.Output, "echo: still here") {
		t.Errorf("the other server: %q", r.Output)
	}
	states := map[string][]string{}
	for _, e := range f.events(t, record.TypeMCPServer) {
		var ms record.MCPServer
		e.Decode(&ms)
		states[ms.Name] = append(states[ms.Name], ms.State)
	}
	want := map[string][]string{"hang": {"failed"}, "exit": {"failed"}, "crash": {"ready", "exited"}, "junk": {"ready", "exited"}, "ok": {"ready"}}
	for n, w := range want {
		if !slices.Equal(states[n], w) {
			t.Errorf("recorded states of %s: %v, want %v", n, states[n], w)
		}
	}
}

// tools/list_changed: the new list is offered before the next request,
// recorded, and the tools already offered keep working.
func TestToolListChanged(t *testing.T) {
	f := newFixture(t)
	h := Start(context.Background(), []config.MCPServer{testServer(t, "t", nil)}, f.env())
	defer h.Close()
	set := tool.NewSet(h.Tools()...)
	if _, ok := set.Get("mcp__t__late"); ok {
		t.Fatal("late offered before it exists")
	}
	if r := call(t, h, "mcp__t__add_tool", `{}`, "c1"); r.IsError {
		t.Fatal(r.Output)
	}
	var specs []string
	for i := 0; i < 50 && !slices.Contains(specs, "mcp__t__late"); i++ {
		time.Sleep(20 * time.Millisecond)
		specs = specs[:0]
		for _, s := range set.Specs() {
			specs = append(specs, s.Name)
		}
	}
	if !slices.Contains(specs, "mcp__t__late") || !slices.Contains(specs, "mcp__t__echo") {
		t.Fatalf("after the change: %v", specs)
	}
	if r := call(t, h, "mcp__t__late", `{}`, "c2"); r.IsError || !strings.HasPrefix(r.Output, "late tool answered") {
		t.Errorf("late: %q", r.Output)
	}
	var last record.MCPServer
	evs := f.events(t, record.TypeMCPServer)
	evs[len(evs)-1].Decode(&last)
	if last.State != record.MCPToolsChanged || !slices.Contains(last.Tools, "mcp__t__late") {
		t.Errorf("recorded %+v", last)
	}
}

// A streamable HTTP server on loopback, reached with a bearer token from
// the environment; a wrong token fails the server with the status.
func TestHTTPServer(t *testing.T) {
	f := newFixture(t)
	srv := mcptest.NewHTTP(t, "remote", "tok-123")
	good := config.MCPServer{Name: "tracker", URL: srv.URL, BearerTokenEnvVar: "TRACKER_TOKEN", Headers: map[string]string{"X-Team": "core"}}
	bad := config.MCPServer{Name: "wrong", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer nope"}, StartupTimeout: 3 * time.Second}
	h := Start(context.Background(), []config.MCPServer{good, bad}, f.env())
	defer h.Close()
	st := map[string]Status{}
	for _, s := range h.Status() {
		st[s.Name] = s
	}
	if s := st["tracker"]; s.State != record.MCPReady || s.ServerName != "remote" || s.Transport != "http" || s.Sandbox != "" {
		t.Fatalf("tracker: %+v", s.MCPServer)
	}
	if s := st["wrong"]; s.State != record.MCPFailed || !strings.Contains(s.Error, "Unauthorized") && !strings.Contains(s.Error, "401") {
		t.Errorf("wrong token: %+v", s.MCPServer)
	}
	r := call(t, h, "mcp__tracker__echo", `{"text": "over http"}`, "c1")
	if r.IsError || !strings.Contains(r.Output, "echo: over http") {
		t.Errorf("echo: %q", r.Output)
	}
	if srv.LastHeader().Get("X-Team") != "core" {
		t.Errorf("headers %v", srv.LastHeader())
	}
	// The endpoint goes away mid-run: an observation saying so, at once.
	srv.CloseClientConnections()
	srv.Close()
	begin := time.Now()
	r = call(t, h, "mcp__tracker__echo", `{"text": "gone"}`, "c2")
	if !r.IsError || r.Meta.MCP.Failure != "unreachable" || !strings.Contains(r.Output, "MCP server tracker: the call failed") || time.Since(begin) > 20*time.Second {
		t.Errorf("after the endpoint went away (%s): %q %+v", time.Since(begin), r.Output, r.Meta.MCP)
	}
	h.Close()
	assertNoSecret(t, f.dir, "tok-123")
	var ms record.MCPServer
	for _, e := range f.events(t, record.TypeMCPServer) {
		if e.Decode(&ms); ms.Name == "tracker" {
			break
		}
	}
	if ms.BearerTokenEnvVar != "TRACKER_TOKEN" || !slices.Equal(ms.HeaderNames, []string{"X-Team"}) {
		t.Errorf("recorded %+v", ms)
	}
}

// A replay serves every MCP result from the record, with the same
// evidence and cut, without any server.
func TestRecordedServesResults(t *testing.T) {
	f := newFixture(t)
	h := Start(context.Background(), []config.MCPServer{testServer(t, "t", nil)}, f.env())
	calls := []struct{ name, args, id string }{
		{"mcp__t__echo", `{"text": "one"}`, "a"},
		{"mcp__t__big", `{"bytes": 40000}`, "b"},
		{"mcp__t__fail", `{}`, "c"},
		{"mcp__t__echo", `{"text": 1}`, "d"},
	}
	var want []tool.Result
	for _, c := range calls {
		r := call(t, h, c.name, c.args, c.id)
		want = append(want, r)
		ev := record.ToolResult{CallID: c.id, Name: c.name, IsError: r.IsError, Output: r.Output, Meta: r.Meta}
		if r.Full != nil {
			ev.FullRef, _ = f.log.PutBlob(r.Full)
		}
		f.log.Append(record.TypeToolResult, "main", ev)
	}
	h.Close()
	evs, err := record.Read(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t)
	f2.runner = nil // nothing may start
	rh, err := Recorded(f.dir, evs.Events, f2.env())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		got := call(t, rh, c.name, c.args, c.id)
		if got.Output != want[i].Output || got.IsError != want[i].IsError || *got.Meta.MCP != *want[i].Meta.MCP {
			t.Errorf("%s: replayed %q %+v\nrecorded %q %+v", c.name, got.Output, got.Meta.MCP, want[i].Output, want[i].Meta.MCP)
		}
	}
	if got := call(t, rh, "mcp__t__echo", `{"text": "new"}`, "z"); !got.IsError || got.Meta.MCP.Failure != "not_recorded" {
		t.Errorf("an unrecorded call: %q", got.Output)
	}
	var ms record.MCPServer
	f2.events(t, record.TypeMCPServer)[0].Decode(&ms)
	if ms.State != record.MCPReplayed || ms.ServerVersion != mcptest.Version {
		t.Errorf("replayed server recorded as %+v", ms)
	}
}

func TestToolName(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"docs", "search"}:             "mcp__docs__search",
		{"docs", "files/read.v2"}:      "mcp__docs__files_read_v2",
		{"gh", "list issues ✓"}:        "mcp__gh__list_issues____",
		{"s", strings.Repeat("a", 80)}: "mcp__s__" + strings.Repeat("a", 47) + "_",
	} {
		got := ToolName(in[0], in[1])
		if !strings.HasPrefix(got, want) || len(got) > 64 {
			t.Errorf("ToolName%v = %q (%d bytes), want prefix %q", in, got, len(got), want)
		}
	}
	if ToolName("s", strings.Repeat("a", 80)) == ToolName("s", strings.Repeat("a", 81)) {
		t.Error("two long names collide")
	}
}

// enabled_tools and disabled_tools choose what is offered, without a
// warning (a choice is not a problem); the rest is recorded as left out.
func TestEnabledAndDisabledTools(t *testing.T) {
	f := newFixture(t)
	srv := testServer(t, "t", nil)
	srv.EnabledTools = []string{"echo", "add"}
	srv.DisabledTools = []string{"add"}
	h := Start(context.Background(), []config.MCPServer{srv}, f.env())
	defer h.Close()
	if got := h.Names(); !slices.Equal(got, []string{"mcp__t__echo"}) {
		t.Fatalf("offered %v", got)
	}
	lo := h.Status()[0].LeftOut
	if !slices.Contains(lo, "add: in disabled_tools") || !slices.Contains(lo, "image: not in enabled_tools") {
		t.Errorf("left out %v", lo)
	}
	for _, w := range f.warns {
		if strings.Contains(w, "enabled_tools") || strings.Contains(w, "disabled_tools") {
			t.Errorf("a warning for a choice: %s", w)
		}
	}
}
