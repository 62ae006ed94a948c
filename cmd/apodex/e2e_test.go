package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// TestCheckedScenario is the "how it will be checked": the CLI against
// an OpenAI-compatible endpoint on loopback that plays parallel calls, a
// malformed call, an unknown tool, writes to /inputs, /etc and /root, a
// connection to the host, a failing command and a 5 MB flood; then the record
// is read, and `runs` and `show` are asked about the run.
func TestCheckedScenario(t *testing.T) {
	runtest.NeedSandbox(t)
	home, inputs := t.TempDir(), t.TempDir()
	csv := "region,value\nnorth,1\nsouth,2\n"
	if err := os.WriteFile(filepath.Join(inputs, "data.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := fmt.Sprintf("apodex-e2e-%d", os.Getpid())
	hostEtc, hostRoot := "/etc/"+probe, "/root/"+probe
	for _, p := range []string{hostEtc, hostRoot} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists before the run; remove it", p)
		}
	}
	passwd := fileContent(t, "/etc/passwd")

	var srv *llmtest.Server
	srv = llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		u, _ := url.Parse(srv.URL)
		port := u.Port()
		turns := []llmtest.Turn{
			// 0: two parallel calls.
			calls(call("write_file", map[string]any{"path": "/workspace/a.txt", "content": "alpha\n"}),
				bash("printf beta > /workspace/b.txt && echo made-b")),
			// 1: a malformed call and an unknown tool.
			calls(llm.ToolCall{Name: "write_file", Arguments: `{"path": `},
				call("launch_rockets", map[string]any{"target": "moon"})),
			// 2: file writes outside the workspace.
			calls(call("write_file", map[string]any{"path": "/inputs/x", "content": "pwned"}),
				call("write_file", map[string]any{"path": "/etc/passwd", "content": "pwned"}),
				call("write_file", map[string]any{"path": hostRoot, "content": "pwned"}),
				call("write_file", map[string]any{"path": "/outputs/report.md", "content": "early"})),
			// 3: the same from the shell.
			calls(bash("echo pwned > /inputs/x"), bash("echo pwned > /inputs/data.csv"),
				bash("echo pwned > "+hostEtc), bash("echo pwned > "+hostRoot)),
			// 4: reach the fake server from inside the sandbox. A connection
			// would also send GET /escaped, which fails the test server-side.
			calls(bash(`command -v bash >/dev/null || { echo NO_BASH; exit 97; }
bash -c 'exec 3<>/dev/tcp/127.0.0.1/`+port+` && printf "GET /escaped HTTP/1.0\r\n\r\n" >&3 && cat <&3' && echo CONNECTED`),
				bash(`command -v curl >/dev/null || { echo NO_CURL; exit 0; }
curl -sS -m 5 http://127.0.0.1:`+port+`/escaped-curl && echo CONNECTED`),
				bash(`echo interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1)`)),
			// 5: a failing command.
			calls(bash("echo about to fail >&2; exit 3")),
			// 6: a 5 MB flood.
			calls(bash(`head -c 5000000 /dev/zero | tr '\0' a`)),
			// 7: done.
			calls(finish("checked everything")),
		}
		if n < len(turns) {
			return turns[n]
		}
		t.Errorf("request %d after the run should have finished", n)
		return calls(finish("again"))
	})

	code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--inputs", inputs, "--json", "do the checks")...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	noCrashText(t, stdout, stderr)
	s := decodeSummary(t, stdout)
	runDir := onlyRun(t, home)

	t.Run("summary", func(t *testing.T) {
		if s.RunID != filepath.Base(runDir) || s.RunDir != runDir || s.Status != "completed" || s.Termination != "completed" || s.Summary != "checked everything" {
			t.Errorf("summary %+v", s)
		}
		want := llm.Usage{PromptTokens: 8 * 100, CompletionTokens: 8 * 20, TotalTokens: 8 * 120, Reported: true}
		if s.Usage != want {
			t.Errorf("usage %+v, want %+v", s.Usage, want)
		}
		if s.Turns != 8 || s.ToolCalls != 18 {
			t.Errorf("turns %d tool calls %d, want 8 and 18", s.Turns, s.ToolCalls)
		}
		var paths []string
		for _, f := range s.Files {
			paths = append(paths, f.Path)
		}
		if want := []string{"/workspace/a.txt", "/workspace/b.txt"}; !slices.Equal(paths, want) {
			t.Errorf("files %v, want %v", paths, want)
		}
		if n := strings.Count(stderr, " → "); n != 18 {
			t.Errorf("%d progress lines on stderr, want one per tool call (18):\n%s", n, stderr)
		}
	})

	reqs := srv.Requests()
	if len(reqs) != 8 {
		t.Fatalf("the model got %d requests, want 8", len(reqs))
	}
	// seen[n] are the observations the model read after turn n.
	seen := func(n int) []llmtest.Message { return toolReplies(reqs[n+1]) }

	t.Run("requests", func(t *testing.T) {
		for i, r := range reqs {
			if !r.Stream || !r.IncludeUsage || r.Model != "m" {
				t.Errorf("request %d: stream %v include_usage %v model %q", i, r.Stream, r.IncludeUsage, r.Model)
			}
			var names []string
			for _, tl := range r.Tools {
				names = append(names, tl.Name)
				var schema struct {
					Type       string                     `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
				}
				if tl.Type != "function" || json.Unmarshal(tl.Parameters, &schema) != nil || schema.Type != "object" || schema.Properties == nil {
					t.Errorf("request %d: tool %s is not a function with a JSON Schema object: %s", i, tl.Name, tl.Parameters)
				}
			}
			for _, want := range []string{"bash", "edit_file", "finish", "grep", "list_files", "read_file", "write_file"} {
				if !slices.Contains(names, want) {
					t.Errorf("request %d: tools %v lack %s", i, names, want)
				}
			}
		}
		if m := reqs[0].Messages; len(m) != 2 || m[0].Role != "system" || m[1].Role != "user" || m[1].Content != "do the checks" {
			t.Errorf("first request messages %+v", m)
		}
	})

	t.Run("parallel calls answered in call order", func(t *testing.T) {
		obs := seen(0)
		if len(obs) != 2 || obs[0].ToolCallID != "call_0_0" || obs[1].ToolCallID != "call_0_1" {
			t.Fatalf("observations %+v", obs)
		}
		if !strings.Contains(obs[0].Content, "created /workspace/a.txt") || exitCode(obs[1].Content) != 0 || !strings.Contains(obs[1].Content, "made-b") {
			t.Errorf("observations %q, %q", obs[0].Content, obs[1].Content)
		}
	})

	t.Run("malformed call and unknown tool are observations", func(t *testing.T) {
		obs := seen(1)
		if len(obs) != 2 {
			t.Fatalf("observations %+v", obs)
		}
		if o := obs[0].Content; !strings.Contains(o, "not valid JSON") || !strings.Contains(o, `"path"`) {
			t.Errorf("malformed call: %q", o)
		}
		if o := obs[1].Content; !strings.Contains(o, `unknown tool "launch_rockets"`) || !strings.Contains(o, "write_file") {
			t.Errorf("unknown tool: %q", o)
		}
	})

	t.Run("writes outside the workspace are refused", func(t *testing.T) {
		for i, o := range seen(2) {
			target := []string{"/inputs/x", "/etc/passwd", hostRoot, "/outputs/report.md"}[i]
			if !strings.HasPrefix(o.Content, "error:") || !strings.Contains(o.Content, target) {
				t.Errorf("write_file %s: %q", target, o.Content)
			}
		}
		for i, o := range seen(3) {
			if exitCode(o.Content) <= 0 {
				t.Errorf("bash write %d did not fail: %q", i, o.Content)
			}
		}
		if got := fileContent(t, "/etc/passwd"); got != passwd {
			t.Errorf("/etc/passwd changed")
		}
		mustNotExist(t, filepath.Join(runDir, "outputs", "report.md"))
		mustNotExist(t, hostEtc)
		mustNotExist(t, hostRoot)
		mustNotExist(t, filepath.Join(inputs, "x"))
		mustNotExist(t, filepath.Join(runDir, "inputs", "x"))
		for _, p := range []string{filepath.Join(inputs, "data.csv"), filepath.Join(runDir, "inputs", "data.csv")} {
			if got := fileContent(t, p); got != csv {
				t.Errorf("%s changed to %q", p, got)
			}
		}
	})

	t.Run("no network from the sandbox", func(t *testing.T) {
		obs := seen(4)
		if len(obs) != 3 {
			t.Fatalf("observations %+v", obs)
		}
		if o := obs[2].Content; !strings.Contains(o, "interfaces: lo\n") {
			t.Errorf("the sandbox has network interfaces besides lo: %q", o)
		}
		for _, o := range obs[:2] {
			if strings.Contains(o.Content, "CONNECTED") || strings.Contains(o.Content, "NO_BASH") {
				t.Errorf("connection attempt: %q", o.Content)
			}
			if !strings.Contains(o.Content, "NO_CURL") && exitCode(o.Content) == 0 {
				t.Errorf("connection attempt did not fail: %q", o.Content)
			}
		}
	})

	t.Run("failing command", func(t *testing.T) {
		o := seen(5)[0].Content
		if exitCode(o) != 3 || !strings.Contains(o, "about to fail") {
			t.Errorf("observation %q", o)
		}
	})

	t.Run("flood is cut for the model and whole in the record", func(t *testing.T) {
		o := seen(6)[0].Content
		if len(o) > 32<<10 {
			t.Errorf("the model read %d bytes of the flood", len(o))
		}
		m := regexp.MustCompile(`bytes cut of (\d+) total`).FindStringSubmatch(o)
		if m == nil {
			t.Fatalf("the observation does not state the cut and the size:\n%.300s", o)
		}
		if total, _ := strconv.Atoi(m[1]); total < 5_000_000 {
			t.Errorf("stated size %d, want at least 5000000", total)
		}
		var flood *record.ToolResult
		for _, r := range decodeAll[record.ToolResult](t, runtest.Events(t, runDir), record.TypeToolResult) {
			if r.Turn == 7 {
				flood = &r
			}
		}
		if flood == nil || flood.FullRef == "" {
			t.Fatalf("no full_ref on the flood's tool_result: %+v", flood)
		}
		p, err := record.BlobPath(runDir, flood.FullRef)
		if err != nil {
			t.Fatal(err)
		}
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(body), "a"); n < 5_000_000 || len(body) > 5_000_000+200 || len(body) != flood.FullBytes {
			t.Errorf("blob: %d bytes with %d a's, full_bytes %d", len(body), n, flood.FullBytes)
		}
	})

	t.Run("record", func(t *testing.T) {
		evs := runtest.Events(t, runDir)
		types := map[string]int{}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
			types[e.Type]++
		}
		for _, typ := range []string{"run_started", "model_request", "model_response", "tool_call", "tool_result", "file_delta", "run_finished"} {
			if types[typ] == 0 {
				t.Errorf("no %s event; types %v", typ, types)
			}
		}
		if evs[0].Type != "run_started" || evs[len(evs)-1].Type != "run_finished" {
			t.Errorf("first %s, last %s", evs[0].Type, evs[len(evs)-1].Type)
		}
		if types["model_request"] != 8 || types["model_response"] != 8 || types["tool_call"] != 18 || types["tool_result"] != 18 {
			t.Errorf("event counts %v", types)
		}
		for _, r := range decodeAll[record.ModelResponse](t, evs, record.TypeModelResponse) {
			if r.Usage != llmtest.DefaultUsage {
				t.Errorf("turn %d usage %+v", r.Turn, r.Usage)
			}
		}
		var malformed bool
		for _, c := range decodeAll[record.ToolCall](t, evs, record.TypeToolCall) {
			malformed = malformed || c.Arguments == `{"path": `
		}
		if !malformed {
			t.Errorf("the malformed call's arguments are not recorded verbatim")
		}
		errs := 0
		for _, r := range decodeAll[record.ToolResult](t, evs, record.TypeToolResult) {
			if r.IsError {
				errs++
			}
			if r.Name == "bash" && r.Turn == 6 && (r.Meta == nil || r.Meta.ExitCode == nil || *r.Meta.ExitCode != 3) {
				t.Errorf("failing command meta %v", r.Meta)
			}
		}
		if errs != 6 { // malformed, unknown, four refused writes
			t.Errorf("%d tool results are errors, want 6", errs)
		}
		var deltas []string // one per change is TestParallelFileChangesRecordedOnce's
		for _, d := range decodeAll[record.FileDelta](t, evs, record.TypeFileDelta) {
			deltas = append(deltas, d.Path)
			// The new content is kept: inline when small, else as a blob.
			if d.Before != "" || d.After == "" || (d.ContentRef == "" && d.Content == "") {
				t.Errorf("file delta %+v", d)
			}
		}
		slices.Sort(deltas)
		deltas = slices.Compact(deltas)
		if want := []string{"/workspace/a.txt", "/workspace/b.txt"}; !slices.Equal(deltas, want) {
			t.Errorf("file deltas %v, want %v", deltas, want)
		}
		rs := decodeAll[record.RunStarted](t, evs, record.TypeRunStarted)[0]
		if rs.Model.Provider != "openai" || rs.Model.BaseURL != srv.URL || !rs.Model.Stream || (rs.Sandbox.Kind != "bwrap" && rs.Sandbox.Kind != "native") || rs.Sandbox.Network || len(rs.Inputs) != 1 {
			t.Errorf("run_started %+v", rs)
		}
		rf := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)[0]
		if rf.Status != "completed" || rf.Termination != "completed" || rf.Usage != s.Usage {
			t.Errorf("run_finished %+v", rf)
		}
	})

	t.Run("runs lists it", func(t *testing.T) {
		code, out, errOut := cli(t, "runs", "--home", home)
		if code != 0 || !strings.Contains(out, s.RunID) || !strings.Contains(out, "completed") || !strings.Contains(out, "do the checks") {
			t.Errorf("exit %d\n%s%s", code, out, errOut)
		}
		code, out, _ = cli(t, "runs", "--home", home, "--json")
		var list []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0]["run_id"] != s.RunID || list[0]["status"] != "completed" {
			t.Errorf("runs --json: exit %d\n%s", code, out)
		}
	})

	t.Run("show summarizes it", func(t *testing.T) {
		code, out, errOut := cli(t, "show", "--home", home, s.RunID[:len(s.RunID)-2])
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"status:      completed", "termination: completed", "8 turns, 18 tool calls (6 errors)", "960 tokens",
			"launch_rockets", "/workspace/a.txt", "/workspace/b.txt", "files:       2"} {
			if !strings.Contains(out, want) {
				t.Errorf("show output lacks %q:\n%s", want, out)
			}
		}
		if n := strings.Count(out, "\n  #"); n != 18 {
			t.Errorf("show lists %d steps, want 18:\n%s", n, out)
		}
		code, out, _ = cli(t, "show", "--json", "--home", home, s.RunID)
		var info struct {
			Status      string            `json:"status"`
			Termination string            `json:"termination_reason"`
			Steps       []json.RawMessage `json:"steps"`
			Files       []json.RawMessage `json:"files"`
			ToolErrors  int               `json:"tool_errors"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
			t.Fatalf("show --json: exit %d\n%s", code, out)
		}
		if info.Status != "completed" || info.Termination != "completed" || len(info.Steps) != 18 || len(info.Files) != 2 || info.ToolErrors != 6 {
			t.Errorf("show --json: status %q termination %q, %d steps, %d files, %d tool errors", info.Status, info.Termination, len(info.Steps), len(info.Files), info.ToolErrors)
		}
	})
}

// Calls of one turn run in parallel; each file change is still recorded
// once, as the change of the call that made it.
func TestParallelFileChangesRecordedOnce(t *testing.T) {
	runtest.NeedSandbox(t)
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(
		call("write_file", map[string]any{"path": "/workspace/a.txt", "content": "by write_file\n"}),
		bash("sleep 0.3; echo by the first bash > /workspace/c.txt"),
		bash("echo by the second bash > /workspace/d.txt"),
	)))
	home := t.TempDir()
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "objective")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	got := map[string][]string{}
	for _, d := range decodeAll[record.FileDelta](t, runtest.Events(t, onlyRun(t, home)), record.TypeFileDelta) {
		got[d.Path] = append(got[d.Path], d.CallID)
	}
	want := map[string][]string{"/workspace/a.txt": {"call_0_0"}, "/workspace/c.txt": {"call_0_1"}, "/workspace/d.txt": {"call_0_2"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("file_delta call ids by path:\n got %v\nwant %v", got, want)
	}
}

// The bundled demo (make demo) completes and writes the right sum.
func TestDemo(t *testing.T) {
	home := t.TempDir()
	args := []string{"run", "--home", home, "--provider", "scripted",
		"--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml"}
	code, out, errOut := cli(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	runDir := onlyRun(t, home)
	sum, err := os.ReadFile(filepath.Join(runDir, "outputs", "sum.txt"))
	if err != nil || strings.TrimSpace(string(sum)) != "6637.00" {
		t.Errorf("sum.txt = %q, %v", sum, err)
	}
	for _, want := range []string{"completed", filepath.Join(runDir, "events.jsonl"), "delivered /outputs/sum.txt", "delivered /outputs/report.md", "passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output does not show %q:\n%s", want, out)
		}
	}
}

// What the model is told — tool descriptions and refusals — names only
// tools it can call. (A plain run has no claim_outputs.)
func TestMessagesNameOnlyAvailableTools(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(
		call("write_file", map[string]any{"path": "/outputs/report.md", "content": "early"}),
		call("edit_file", map[string]any{"path": "/workspace/none.txt", "old_text": "a", "new_text": "b"}),
		call("read_file", map[string]any{"path": "/workspace"}),
	)))
	home := t.TempDir()
	if code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "objective")...); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	reqs := srv.Requests()
	tools, args := []string{}, []string{}
	for _, tl := range reqs[0].Tools {
		tools = append(tools, tl.Name)
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		json.Unmarshal(tl.Parameters, &schema)
		for a := range schema.Properties {
			args = append(args, a)
		}
	}
	// "use X", "call X", "with X": X a snake_case name that is not an argument.
	mention := regexp.MustCompile(`\b(?:use|call|with) ([a-z]+(?:_[a-z]+)+)\b`)
	check := func(where, text string) {
		for _, m := range mention.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(tools, m[1]) && !slices.Contains(args, m[1]) {
				t.Errorf("%s tells the model to use %q, which is not one of its tools %v:\n%s", where, m[1], tools, text)
			}
		}
	}
	for _, tl := range reqs[0].Tools {
		check("the description of "+tl.Name, tl.Description)
	}
	for _, o := range toolReplies(reqs[1]) {
		if !strings.HasPrefix(o.Content, "error:") {
			t.Errorf("%s: not refused: %q", o.ToolCallID, o.Content)
		}
		check("the observation of "+o.ToolCallID, o.Content)
	}
}

// The record says which tools the model was offered: run_started.tools and
// every model_request's tools_ref match what the endpoint received.
func TestRecordNamesTheToolsOffered(t *testing.T) {
	srv := llmtest.NewOpenAI(t, llmtest.Script())
	home := t.TempDir()
	if code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "objective")...); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var offered []string
	for _, tl := range srv.Requests()[0].Tools {
		offered = append(offered, tl.Name)
	}
	slices.Sort(offered)
	runDir := onlyRun(t, home)
	evs := runtest.Events(t, runDir)
	started := decodeAll[record.RunStarted](t, evs, record.TypeRunStarted)[0].Tools
	slices.Sort(started)
	if !slices.Equal(started, offered) {
		t.Errorf("run_started.tools %v, the model was offered %v", started, offered)
	}
	for _, r := range decodeAll[record.ModelRequest](t, evs, record.TypeModelRequest) {
		p, err := record.BlobPath(runDir, r.ToolsRef)
		if err != nil {
			t.Fatalf("model_request tools_ref: %v", err)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var specs []llm.ToolSpec
		if err := json.Unmarshal(raw, &specs); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range specs {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, offered) {
			t.Errorf("turn %d: tools_ref names %v, the model was offered %v", r.Turn, names, offered)
		}
	}
}
