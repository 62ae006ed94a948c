package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/runtest"
)

// clearModelEnv keeps the developer's environment out of a test.
func clearModelEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "APODEX_MODEL", "APODEX_PROVIDER", "APODEX_BASE_URL", "APODEX_PROFILE", "APODEX_SANDBOX"} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

// A config profile selects a loopback endpoint with no model flags, and
// `config show` names the source of each value.
func TestConfigProfile(t *testing.T) {
	clearModelEnv(t)
	home := t.TempDir()
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("done"))))
	conf := fmt.Sprintf("profile = \"local\"\nmax_turns = 12\nsandbox = \"none\"\n\n[profiles.local]\nprovider = \"openai\"\nbase_url = %q\nmodel = \"served-model\"\ncontext_window = 16384\n", srv.URL)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "run", "--home", home, "--quiet", "--json", "finish at once")
	if code != 0 {
		t.Fatalf("run with the profile: exit %d %s", code, errOut)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Model != "served-model" {
		t.Errorf("requests %+v", reqs)
	}
	info, _ := loadInfo(decodeSummary(t, out).RunDir)
	if info.Sandbox.Kind != "none" || info.Model.Name != "served-model" {
		t.Errorf("run settings %+v %+v", info.Sandbox, info.Model)
	}
	t.Setenv("APODEX_MODEL", "env-model")
	code, out, errOut = cli(t, "config", "show", "--home", home, "--max-turns", "3")
	if code != 0 {
		t.Fatalf("config show: exit %d %s", code, errOut)
	}
	cf := filepath.Join(home, "config.toml")
	for _, re := range []string{
		`profile\s+local\s+file`,
		`provider\s+openai\s+profile local \(` + cf,
		`base_url\s+` + srv.URL + `\s+profile local`,
		`model\s+env-model\s+env APODEX_MODEL`,
		`max_turns\s+3\s+flag --max-turns`,
		`sandbox\s+none\s+file ` + cf,
		`max_tool_calls\s+200\s+default`,
		`OPENAI_API_KEY\s+not set`,
	} {
		if !regexpLine(out, re) {
			t.Errorf("config show lacks %s:\n%s", re, out)
		}
	}
	code, _, errOut = cli(t, "config", "show", "--home", home, "--profile", "remote")
	if code != 2 || !strings.Contains(errOut, `unknown profile "remote"`) || !strings.Contains(errOut, "local") {
		t.Errorf("unknown profile: exit %d %s", code, errOut)
	}
	os.WriteFile(cf, []byte("max_turns = \"many\"\n"), 0o644)
	code, _, errOut = cli(t, "run", "--home", home, "x")
	if code != 2 || !strings.Contains(errOut, "max_turns") || !strings.Contains(errOut, cf) {
		t.Errorf("bad value in the file: exit %d %s", code, errOut)
	}
}

// doctor reports a closed port as unreachable (exit 1) and a working fake
// endpoint as fine (exit 0), with the tool-call probe answered.
func TestDoctorEndpoint(t *testing.T) {
	clearModelEnv(t)
	runtest.NeedSandbox(t) // without bubblewrap the sandbox check fails, rightly
	home := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	code, out, _ := cli(t, "doctor", "--home", home, "--provider", "openai", "--base-url", closed, "--model", "m")
	if code != 1 || !regexpLine(out, `FAIL\s+endpoint\s+reachable .*unreachable`) || !strings.Contains(out, "fix: start the server") {
		t.Errorf("closed port: exit %d\n%s", code, out)
	}
	srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Calls: []llm.ToolCall{call("report", map[string]any{"status": "ok"})}}
	})
	srv.SetModels("m", "other")
	code, out, _ = cli(t, "doctor", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m")
	if code != 0 || !regexpLine(out, `ok\s+endpoint\s+model m: listed`) || !regexpLine(out, `ok\s+endpoint\s+tool-call probe: the server returned a parseable tool call`) {
		t.Errorf("working endpoint: exit %d\n%s", code, out)
	}
	code, out, _ = cli(t, "doctor", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "absent")
	if code != 1 || !strings.Contains(out, "served: m, other") {
		t.Errorf("unserved model: exit %d\n%s", code, out)
	}
	text := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn {
		return llmtest.Turn{Content: `<tool_call>{"name": "report", "arguments": {"status": "ok"}}</tool_call>`}
	})
	text.SetModels("m")
	code, out, _ = cli(t, "doctor", "--home", home, "--provider", "openai", "--base-url", text.URL, "--model", "m")
	if code != 1 || !strings.Contains(out, "as text") || !strings.Contains(out, "--enable-auto-tool-choice") {
		t.Errorf("tool call as text: exit %d\n%s", code, out)
	}
	if !regexpLine(out, `(ok|warn|FAIL)\s+sandbox\s+landlock`) || !regexpLine(out, `ok\s+home`) {
		t.Errorf("machine checks missing:\n%s", out)
	}
}
