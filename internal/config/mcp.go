package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// MCP servers are configured the way users already write them: the
// [mcp_servers.NAME] tables of Codex CLI's config.toml (top level or in a
// profile), and Claude Code's project .mcp.json ({"mcpServers": {…}},
// passed with --mcp-config). Both give an MCPServer; a secret (an env
// value, a header value, a token) is only ever read at start, never kept
// in anything that is written down.

// Defaults of an MCP server's timeouts (Codex CLI's).
const (
	DefaultMCPStartup = 10 * time.Second
	DefaultMCPTool    = 60 * time.Second
)

// MCPServer is one configured MCP server: a stdio server Apodex starts
// (Command) or a streamable HTTP endpoint (URL).
type MCPServer struct {
	Name string
	// Stdio: the command, its arguments, the environment it is given (its
	// values are secrets: never recorded), the names of variables passed
	// through from Apodex's own environment, and its working directory.
	Command string
	Args    []string
	Env     map[string]string
	EnvVars []string
	Cwd     string
	// HTTP: the endpoint, the variable holding a bearer token, headers
	// (values secret) and headers whose values come from variables.
	URL               string
	BearerTokenEnvVar string
	Headers           map[string]string
	EnvHeaders        map[string]string
	// StartupTimeout bounds starting and listing the tools, ToolTimeout
	// one call (0: the defaults).
	StartupTimeout, ToolTimeout time.Duration
	// EnabledTools, if set, are the only tools offered; DisabledTools are
	// never offered.
	EnabledTools, DisabledTools []string
	// Disabled: `enabled = false`; the server is known but not started.
	Disabled bool
	// NoSandbox (`sandbox = false`) runs a stdio server on the host, an
	// explicit opt-out that is recorded; Network lets a sandboxed one
	// reach the network; Planes are the run's planes it sees, read-only
	// ("/inputs", "/workspace", "/outputs"); Writable are the directories
	// it may write ("/workspace" or a directory below it, cleaned), the
	// only ones mounted writable in its sandbox.
	NoSandbox bool
	Network   bool
	Planes    []string
	Writable  []string
	// Expand: values may hold ${VAR} or ${VAR:-default} (.mcp.json),
	// expanded from the environment when the server starts.
	Expand bool
	// Source is where the entry came from, for messages.
	Source string
}

// Transport is "stdio" or "http".
func (s MCPServer) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// Startup and Tool are the timeouts in force.
func (s MCPServer) Startup() time.Duration { return orDefault(s.StartupTimeout, DefaultMCPStartup) }
func (s MCPServer) Tool() time.Duration    { return orDefault(s.ToolTimeout, DefaultMCPTool) }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// mcpName is what a server's name may be: it becomes part of tool names
// (mcp__NAME__TOOL), which the providers limit to these characters; "__"
// is kept for the separator.
var mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// mcpEntry is a [mcp_servers.NAME] table as written.
type mcpEntry struct {
	Command           string            `toml:"command" json:"command"`
	Args              []string          `toml:"args" json:"args"`
	Env               map[string]string `toml:"env" json:"env"`
	EnvVars           []string          `toml:"env_vars" json:"env_vars"`
	Cwd               string            `toml:"cwd" json:"cwd"`
	URL               string            `toml:"url" json:"url"`
	Type              string            `toml:"-" json:"type"`
	BearerTokenEnvVar string            `toml:"bearer_token_env_var" json:"bearer_token_env_var"`
	Headers           map[string]string `toml:"headers" json:"headers"`
	HTTPHeaders       map[string]string `toml:"http_headers" json:"-"`
	EnvHTTPHeaders    map[string]string `toml:"env_http_headers" json:"env_http_headers"`
	StartupTimeout    any               `toml:"startup_timeout" json:"startup_timeout"`
	StartupTimeoutSec *float64          `toml:"startup_timeout_sec" json:"startup_timeout_sec"`
	StartupTimeoutMS  *float64          `toml:"startup_timeout_ms" json:"-"`
	ToolTimeout       any               `toml:"tool_timeout" json:"tool_timeout"`
	ToolTimeoutSec    *float64          `toml:"tool_timeout_sec" json:"tool_timeout_sec"`
	EnabledTools      []string          `toml:"enabled_tools" json:"enabled_tools"`
	DisabledTools     []string          `toml:"disabled_tools" json:"disabled_tools"`
	Enabled           *bool             `toml:"enabled" json:"enabled"`
	Sandbox           *bool             `toml:"sandbox" json:"sandbox"`
	Network           bool              `toml:"network" json:"network"`
	Planes            []string          `toml:"planes" json:"planes"`
	Writable          []string          `toml:"writable" json:"writable"`
}

// mcpKeys are the keys of an entry, for messages.
const mcpKeys = "command, args, env, env_vars, cwd, url, bearer_token_env_var, headers (or http_headers), env_http_headers, startup_timeout (or startup_timeout_sec), tool_timeout (or tool_timeout_sec), enabled_tools, disabled_tools, enabled, sandbox, network, planes, writable"

// loadMCP reads the [mcp_servers.NAME] tables of a file, top level and per
// profile; an unknown key is an error naming it.
func loadMCP(path string, data []byte, f *File) error {
	var doc struct {
		MCPServers map[string]mcpEntry `toml:"mcp_servers"`
		Profiles   map[string]struct {
			MCPServers map[string]mcpEntry `toml:"mcp_servers"`
		} `toml:"profiles"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return fmt.Errorf("config: %s: mcp_servers: %v", path, err)
	}
	for _, k := range md.Undecoded() {
		in := k[0] == "mcp_servers" && len(k) >= 3 || k[0] == "profiles" && len(k) >= 5 && k[2] == "mcp_servers"
		if in {
			return fmt.Errorf("config: %s: unknown key %s; an [mcp_servers.NAME] table takes %s", path, k, mcpKeys)
		}
	}
	conv := func(prefix, source string, entries map[string]mcpEntry) (map[string]MCPServer, error) {
		out := map[string]MCPServer{}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			s, err := entries[name].server(name, source)
			if err != nil {
				return nil, fmt.Errorf("config: %s: %s%s: %v", path, prefix, name, err)
			}
			out[name] = s
		}
		return out, nil
	}
	if f.MCP, err = conv("mcp_servers.", "file "+path, doc.MCPServers); err != nil {
		return err
	}
	for pname, p := range doc.Profiles {
		if len(p.MCPServers) == 0 {
			continue
		}
		m, err := conv("profiles."+pname+".mcp_servers.", fmt.Sprintf("profile %s (%s)", pname, path), p.MCPServers)
		if err != nil {
			return err
		}
		if f.ProfileMCP == nil {
			f.ProfileMCP = map[string]map[string]MCPServer{}
		}
		f.ProfileMCP[pname] = m
	}
	return nil
}

// server checks an entry and makes it an MCPServer.
func (e mcpEntry) server(name, source string) (MCPServer, error) {
	s := MCPServer{Name: name, Command: e.Command, Args: e.Args, Env: e.Env, EnvVars: e.EnvVars, Cwd: e.Cwd,
		URL: e.URL, BearerTokenEnvVar: e.BearerTokenEnvVar, Headers: e.Headers, EnvHeaders: e.EnvHTTPHeaders,
		EnabledTools: e.EnabledTools, DisabledTools: e.DisabledTools, Network: e.Network, Source: source}
	if len(e.HTTPHeaders) > 0 {
		if len(e.Headers) > 0 {
			return s, errors.New("give headers or http_headers, not both")
		}
		s.Headers = e.HTTPHeaders
	}
	s.Disabled = e.Enabled != nil && !*e.Enabled
	s.NoSandbox = e.Sandbox != nil && !*e.Sandbox
	var err error
	if s.StartupTimeout, err = timeout("startup_timeout", e.StartupTimeout, e.StartupTimeoutSec, e.StartupTimeoutMS); err != nil {
		return s, err
	}
	if s.ToolTimeout, err = timeout("tool_timeout", e.ToolTimeout, e.ToolTimeoutSec, nil); err != nil {
		return s, err
	}
	for _, p := range e.Planes {
		plane := "/" + strings.Trim(p, "/")
		if plane != "/inputs" && plane != "/workspace" && plane != "/outputs" {
			return s, fmt.Errorf("planes: %q is not a plane; use inputs, workspace or outputs (each seen read-only)", p)
		}
		if !slices.Contains(s.Planes, plane) {
			s.Planes = append(s.Planes, plane)
		}
	}
	for _, w := range e.Writable {
		dir, err := writableDir(w)
		if err != nil {
			return s, fmt.Errorf("writable: %v", err)
		}
		if !slices.Contains(s.Writable, dir) {
			s.Writable = append(s.Writable, dir)
		}
	}
	return s, s.check()
}

// writableDir is a directory a server may write, as a plane path: the
// workspace or a directory below it. /inputs is read-only for every tool;
// /outputs is written only through publication (claim_outputs).
func writableDir(w string) (string, error) {
	clean := path.Clean("/" + strings.Trim(w, "/"))
	for _, part := range strings.Split(strings.Trim(w, "/"), "/") {
		if part == ".." {
			return "", fmt.Errorf("%q: a path with .. is not allowed; give workspace or a directory below it, e.g. workspace/reports", w)
		}
	}
	switch plane, _, _ := strings.Cut(strings.TrimPrefix(clean, "/"), "/"); plane {
	case "workspace":
		return clean, nil
	case "inputs":
		return "", fmt.Errorf("%q: /inputs is read-only for every tool; give workspace or a directory below it", w)
	case "outputs":
		return "", fmt.Errorf("%q: /outputs is written only through publication (the agent's claim_outputs); let the server write under workspace and the agent deliver from there", w)
	}
	return "", fmt.Errorf("%q is not in a plane; give workspace or a directory below it, e.g. workspace/reports", w)
}

// check refuses an entry that cannot work, saying what to change.
func (s MCPServer) check() error {
	switch {
	case !mcpName.MatchString(s.Name) || strings.Contains(s.Name, "__"):
		return fmt.Errorf("the name %q must be 1 to 40 letters, digits, '_' or '-' without \"__\" (it becomes part of the tool names mcp__NAME__TOOL)", s.Name)
	case s.Command == "" && s.URL == "":
		return errors.New("give command (a stdio server Apodex starts) or url (a streamable HTTP server)")
	case s.Command != "" && s.URL != "":
		return errors.New("give command or url, not both")
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0 || len(s.EnvVars) > 0 || s.Cwd != ""):
		return errors.New("args, env, env_vars and cwd are for a stdio server (command); this one has a url")
	case s.Command != "" && (len(s.Headers) > 0 || len(s.EnvHeaders) > 0 || s.BearerTokenEnvVar != ""):
		return errors.New("headers and bearer_token_env_var are for an HTTP server (url); this one has a command")
	case s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") && !s.Expand:
		return fmt.Errorf("url %q: use an http:// or https:// URL", s.URL)
	case s.URL != "" && (len(s.Planes) > 0 || len(s.Writable) > 0 || s.NoSandbox):
		return errors.New("sandbox, planes and writable are for a stdio server Apodex starts; an HTTP server runs elsewhere")
	case s.NoSandbox && len(s.Writable) > 0:
		return errors.New("writable limits what a sandboxed server may write; with sandbox = false it runs on the host and writes wherever your user can: drop one of them")
	}
	return nil
}

// timeout reads one of a timeout's spellings: a duration ("30s") or a
// number of seconds, or Codex's _sec (seconds) and _ms keys.
func timeout(key string, v any, sec, ms *float64) (time.Duration, error) {
	n := 0
	var d time.Duration
	if v != nil {
		n++
		switch x := v.(type) {
		case string:
			var err error
			if d, err = time.ParseDuration(x); err != nil {
				return 0, fmt.Errorf("%s %q: use a duration like 30s or 2m, or a number of seconds", key, x)
			}
		case int64:
			d = time.Duration(x) * time.Second
		case float64:
			d = time.Duration(x * float64(time.Second))
		default:
			return 0, fmt.Errorf("%s: use a duration like 30s or a number of seconds", key)
		}
	}
	if sec != nil {
		n++
		d = time.Duration(*sec * float64(time.Second))
	}
	if ms != nil {
		n++
		d = time.Duration(*ms * float64(time.Millisecond))
	}
	switch {
	case n > 1:
		return 0, fmt.Errorf("give %s once (it is also spelled %s_sec)", key, key)
	case d < 0:
		return 0, fmt.Errorf("%s must not be negative", key)
	}
	return d, nil
}

// MCPConfig reads a project's .mcp.json (Claude Code's shape:
// {"mcpServers": {"NAME": {"command", "args", "env"} or {"type": "http",
// "url", "headers"}}}); values may use ${VAR} and ${VAR:-default},
// expanded when a server starts. Apodex's own keys (startup_timeout,
// tool_timeout, enabled_tools, disabled_tools, sandbox, network, planes,
// writable) are accepted too; any other key is an error naming it.
func MCPConfig(path string) (map[string]MCPServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--mcp-config %s: %v", path, err)
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("--mcp-config %s: %v; the file is {\"mcpServers\": {\"NAME\": {\"command\": …, \"args\": […]}}}", path, err)
	}
	out := map[string]MCPServer{}
	for _, name := range slices.Sorted(maps.Keys(doc.MCPServers)) {
		var e mcpEntry
		d := json.NewDecoder(bytes.NewReader(doc.MCPServers[name]))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("--mcp-config %s: mcpServers.%s: %v; an entry takes type, %s", path, name, err, mcpKeys)
		}
		switch e.Type {
		case "", "stdio", "http", "streamable-http":
		case "sse":
			return nil, fmt.Errorf("--mcp-config %s: mcpServers.%s: type sse (the old HTTP+SSE transport) is not supported; use the server's streamable HTTP endpoint with type http", path, name)
		default:
			return nil, fmt.Errorf("--mcp-config %s: mcpServers.%s: type %q: use stdio or http", path, name, e.Type)
		}
		s, err := e.server(name, "--mcp-config "+path)
		if err != nil {
			return nil, fmt.Errorf("--mcp-config %s: mcpServers.%s: %v", path, name, err)
		}
		s.Expand = true
		if (e.Type == "http" || e.Type == "streamable-http") && s.URL == "" {
			return nil, fmt.Errorf("--mcp-config %s: mcpServers.%s: type %s needs a url", path, name, e.Type)
		}
		out[name] = s
	}
	return out, nil
}

// ResolveMCP is the MCP servers in force: the files' [mcp_servers] (a
// later file's entry replaces an earlier one of the same name), then the
// selected profile's, then extra (--mcp-config), each replacing a server of
// the same name whole.
func ResolveMCP(files []File, profile string, extra map[string]MCPServer) map[string]MCPServer {
	out := map[string]MCPServer{}
	for _, f := range files {
		maps.Copy(out, f.MCP)
	}
	if profile != "" {
		for _, f := range files {
			maps.Copy(out, f.ProfileMCP[profile])
		}
	}
	maps.Copy(out, extra)
	return out
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// ExpandEnv expands ${VAR} and ${VAR:-default} in s with getenv; a
// variable that is unset (or empty) without a default is an error naming
// it.
func ExpandEnv(s string, getenv func(string) string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		g := envRef.FindStringSubmatch(m)
		if v := getenv(g[1]); v != "" {
			return v
		}
		if g[2] != "" {
			return g[3]
		}
		missing = append(missing, g[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("${%s} is not set: set it in the environment or give a default (${%s:-value})", missing[0], missing[0])
	}
	return out, nil
}

// Describe is the entry in one line, as `apodex config show` prints it:
// how it is reached and what it may do; of env and headers only the
// names, values as written (before ${VAR} expansion).
func (s MCPServer) Describe() string {
	var b strings.Builder
	if s.Transport() == "http" {
		b.WriteString("http " + s.URL)
		names := append(slices.Sorted(maps.Keys(s.Headers)), slices.Sorted(maps.Keys(s.EnvHeaders))...)
		if len(names) > 0 {
			b.WriteString("; headers " + strings.Join(names, ", "))
		}
		if s.BearerTokenEnvVar != "" {
			b.WriteString("; token from $" + s.BearerTokenEnvVar)
		}
	} else {
		b.WriteString("stdio " + strings.TrimSpace(s.Command+" "+strings.Join(s.Args, " ")))
		if envs := append(slices.Sorted(maps.Keys(s.Env)), s.EnvVars...); len(envs) > 0 {
			b.WriteString("; env " + strings.Join(envs, ", "))
		}
		switch {
		case s.NoSandbox:
			b.WriteString("; sandbox = false (on the host, unisolated)")
		default:
			b.WriteString("; sandboxed, network " + map[bool]string{true: "outbound", false: "off"}[s.Network])
			if len(s.Planes) > 0 {
				b.WriteString(", reads " + strings.Join(s.Planes, " "))
			}
			if len(s.Writable) > 0 {
				b.WriteString(", writes " + strings.Join(s.Writable, " "))
			} else {
				b.WriteString(", writes nothing")
			}
		}
	}
	if len(s.EnabledTools) > 0 {
		b.WriteString("; only tools " + strings.Join(s.EnabledTools, ", "))
	}
	if len(s.DisabledTools) > 0 {
		b.WriteString("; not tools " + strings.Join(s.DisabledTools, ", "))
	}
	if s.Disabled {
		b.WriteString("; enabled = false (only a task naming it starts it)")
	}
	return b.String()
}
