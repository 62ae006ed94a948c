package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Codex CLI's [mcp_servers.NAME] tables, at the top level and in a profile:
// both transports, both spellings of the timeouts, and the profile's entry
// replacing the file's whole.
func TestMCPServersFromTOML(t *testing.T) {
	p := write(t, t.TempDir(), `
model = "m"
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]
env = { TOKEN = "s3cret" }
env_vars = ["HOME"]
startup_timeout_sec = 20
tool_timeout = "90s"
enabled_tools = ["search"]
planes = ["inputs", "/workspace"]
writable = ["workspace/reports/", "/workspace/reports", "workspace/a/./b"]
network = true

[mcp_servers.tracker]
url = "https://mcp.example.test/mcp"
bearer_token_env_var = "TRACKER_TOKEN"
http_headers = { "X-Team" = "core" }
disabled_tools = ["delete_issue"]

[profiles.local]
model = "q"
[profiles.local.mcp_servers.docs]
command = "/opt/docs/server"
sandbox = false
`)
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	docs := f.MCP["docs"]
	if docs.Command != "npx" || !slices.Equal(docs.Args, []string{"-y", "docs-server"}) || docs.Env["TOKEN"] != "s3cret" ||
		docs.Startup() != 20*time.Second || docs.Tool() != 90*time.Second || !docs.Network ||
		!slices.Equal(docs.Planes, []string{"/inputs", "/workspace"}) || !slices.Equal(docs.Writable, []string{"/workspace/reports", "/workspace/a/b"}) || docs.Transport() != "stdio" || docs.Source != "file "+p {
		t.Fatalf("docs: %+v", docs)
	}
	tr := f.MCP["tracker"]
	if tr.Transport() != "http" || tr.Headers["X-Team"] != "core" || tr.BearerTokenEnvVar != "TRACKER_TOKEN" || tr.Startup() != DefaultMCPStartup || tr.Tool() != DefaultMCPTool {
		t.Fatalf("tracker: %+v", tr)
	}
	if f.Defaults["model"] != "m" || f.Profiles["local"]["model"] != "q" {
		t.Fatalf("the other keys: %v %v", f.Defaults, f.Profiles)
	}
	all := ResolveMCP([]File{f}, "", nil)
	if len(all) != 2 || all["docs"].Command != "npx" {
		t.Fatalf("without a profile: %+v", all)
	}
	all = ResolveMCP([]File{f}, "local", map[string]MCPServer{"extra": {Name: "extra", Command: "x"}})
	if d := all["docs"]; d.Command != "/opt/docs/server" || !d.NoSandbox || len(d.Args) != 0 || !strings.HasPrefix(d.Source, "profile local") {
		t.Fatalf("the profile's docs: %+v", d)
	}
	if all["extra"].Command != "x" || all["tracker"].URL == "" {
		t.Fatalf("resolved %+v", all)
	}
}

func TestMCPServerErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[mcp_servers.a]\ncommand = \"x\"\ncomand = \"y\"\n", "unknown key mcp_servers.a.comand"},
		{"[profiles.p.mcp_servers.a]\ncommand = \"x\"\ntimeout = 3\n", "unknown key profiles.p.mcp_servers.a.timeout"},
		{"[mcp_servers.a]\nargs = [\"x\"]\n", "mcp_servers.a: give command"},
		{"[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n", "not both"},
		{"[mcp_servers.a]\nurl = \"http://h\"\nenv = {A = \"b\"}\n", "are for a stdio server"},
		{"[mcp_servers.a]\ncommand = \"x\"\nheaders = {A = \"b\"}\n", "are for an HTTP server"},
		{"[mcp_servers.a]\nurl = \"ftp://h\"\n", "http:// or https://"},
		{"[mcp_servers.a]\ncommand = \"x\"\ntool_timeout = \"soon\"\n", "tool_timeout \"soon\""},
		{"[mcp_servers.a]\ncommand = \"x\"\nstartup_timeout = 3\nstartup_timeout_sec = 4\n", "give startup_timeout once"},
		{"[mcp_servers.a]\ncommand = \"x\"\nplanes = [\"/etc\"]\n", "planes: \"/etc\" is not a plane"},
		{"[mcp_servers.a]\ncommand = \"x\"\nwritable = [\"outputs\"]\n", "writable: \"outputs\": /outputs is written only through publication"},
		{"[mcp_servers.a]\ncommand = \"x\"\nwritable = [\"/inputs/x\"]\n", "/inputs is read-only for every tool"},
		{"[mcp_servers.a]\ncommand = \"x\"\nwritable = [\"workspace/../etc\"]\n", "a path with .. is not allowed"},
		{"[mcp_servers.a]\ncommand = \"x\"\nwritable = [\"/tmp\"]\n", "\"/tmp\" is not in a plane"},
		{"[mcp_servers.a]\ncommand = \"x\"\nsandbox = false\nwritable = [\"workspace\"]\n", "with sandbox = false it runs on the host"},
		{"[mcp_servers.a]\nurl = \"http://h\"\nwritable = [\"workspace\"]\n", "sandbox, planes and writable are for a stdio server"},
		{"[mcp_servers.\"a.b\"]\ncommand = \"x\"\n", "the name \"a.b\""},
		{"[mcp_servers.a__b]\ncommand = \"x\"\n", "without \"__\""},
	} {
		_, err := Load(write(t, t.TempDir(), c.toml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), FileName) {
			t.Errorf("%q: got %v, want it to name the file and say %q", c.toml, err, c.want)
		}
	}
}

// Claude Code's .mcp.json: stdio and http entries, ${VAR} kept unexpanded
// until start, sse and unknown keys refused naming them.
func TestMCPConfigJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".mcp.json")
	os.WriteFile(p, []byte(`{"mcpServers": {
	  "fs": {"command": "${BIN:-/usr/bin/fs-server}", "args": ["--root", "${ROOT}"], "env": {"KEY": "${API_KEY}"}},
	  "api": {"type": "http", "url": "https://api.test/mcp", "headers": {"Authorization": "Bearer ${API_KEY}"}, "tool_timeout": 5}
	}}`), 0o644)
	m, err := MCPConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if fs := m["fs"]; !fs.Expand || fs.Command != "${BIN:-/usr/bin/fs-server}" || fs.Env["KEY"] != "${API_KEY}" || fs.Source != "--mcp-config "+p {
		t.Fatalf("fs %+v", fs)
	}
	if api := m["api"]; api.Transport() != "http" || api.Tool() != 5*time.Second {
		t.Fatalf("api %+v", api)
	}
	getenv := env(map[string]string{"ROOT": "/data", "API_KEY": "k"})
	for in, want := range map[string]string{"${BIN:-/usr/bin/fs-server}": "/usr/bin/fs-server", "--root=${ROOT}": "--root=/data", "Bearer ${API_KEY}": "Bearer k", "$HOME": "$HOME"} {
		if got, err := ExpandEnv(in, getenv); err != nil || got != want {
			t.Errorf("ExpandEnv(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ExpandEnv("${NOPE}", getenv); err == nil || !strings.Contains(err.Error(), "${NOPE} is not set") {
		t.Errorf("an unset variable: %v", err)
	}

	for body, want := range map[string]string{
		`{"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}`: "type sse",
		`{"mcpServers": {"a": {"command": "x", "timeout": 3}}}`:         `unknown field "timeout"`,
		`{"servers": {}}`:                         `unknown field "servers"`,
		`{"mcpServers": {"a": {"type": "http"}}}`: "give command",
		`{"mcpServers": {"a": {"command": "x", "http_headers": {"A": "b"}}}}`: `unknown field "http_headers"`,
	} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := MCPConfig(p); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want %q and the path", body, err, want)
		}
	}
}
