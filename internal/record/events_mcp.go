package record

import "encoding/json"

// Event types of MCP servers (issue #29): tools of outside servers offered
// in a run. A call of one of their tools is an ordinary tool_call and
// tool_result, whose meta names the server (MCPCall).
const (
	// TypeMCPServer says what became of one MCP server of the run: it
	// started and listed its tools, could not start, exited, or changed
	// its tools; its payload is MCPServer.
	TypeMCPServer = "mcp_server"
)

// States of an MCP server (MCPServer.State).
const (
	MCPReady        = "ready"         // started; its tools are offered
	MCPFailed       = "failed"        // could not start or list its tools; none offered
	MCPExited       = "exited"        // it stopped during the run; its tools answer with why
	MCPToolsChanged = "tools_changed" // it said its tool list changed; Tools is the new list
	MCPReplayed     = "replayed"      // a replay serves its recorded results; no server ran
)

// EvidenceMCP is the evidence kind of the text an MCP tool returned; its
// source is "mcp:<server>/<tool>".
const EvidenceMCP = "mcp"

// MCPServer is one MCP server of the run as configured and as it answered.
// It never holds a secret: of the environment and the HTTP headers only
// the names are kept, and command, args and url as written in the
// configuration (before ${VAR} expansion).
type MCPServer struct {
	Name      string   `json:"name"`      // the configured name, NAME in mcp__NAME__TOOL
	State     string   `json:"state"`     // MCPReady, MCPFailed, MCPExited, MCPToolsChanged or MCPReplayed
	Transport string   `json:"transport"` // "stdio" or "http"
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	URL       string   `json:"url,omitempty"`
	// EnvKeys and HeaderNames name what the server was given, never the
	// values; BearerTokenEnvVar names the variable the token came from.
	EnvKeys           []string `json:"env_keys,omitempty"`
	HeaderNames       []string `json:"header_names,omitempty"`
	BearerTokenEnvVar string   `json:"bearer_token_env_var,omitempty"`
	// Sandbox is how a stdio server ran: the sandbox kind ("bwrap",
	// "native") or "none" when its entry opted out (sandbox = false);
	// Network says it could reach the network; Planes are the planes it
	// saw, read-only; Writable the directories it could write (/workspace
	// or below), the only ones.
	Sandbox  string   `json:"sandbox,omitempty"`
	Network  bool     `json:"network,omitempty"`
	Planes   []string `json:"planes,omitempty"`
	Writable []string `json:"writable,omitempty"`
	// ServerName, ServerVersion and Protocol are what the server reported.
	ServerName    string `json:"server_name,omitempty"`
	ServerVersion string `json:"server_version,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
	// Tools are the names offered (mcp__NAME__TOOL); ToolsRef is the blob
	// of their specifications (a JSON array of MCPTool).
	Tools    []string `json:"tools,omitempty"`
	ToolsRef string   `json:"tools_ref,omitempty"`
	// LeftOut are the server's tools not offered, each "TOOL: why"
	// (an invalid input schema, enabled_tools, disabled_tools).
	LeftOut []string `json:"left_out,omitempty"`
	// Error says why it failed or exited.
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// MCPTool is one tool of an MCP server as offered to the model (an element
// of MCPServer.ToolsRef's blob).
type MCPTool struct {
	Name        string          `json:"name"` // as offered, mcp__NAME__TOOL
	Tool        string          `json:"tool"` // the server's own name
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// MCPOffered is one MCP server of a run as its run_started event names it
// (RunStarted.MCP): the server, how it was reached, its state when the
// run started and the tools it offered then.
type MCPOffered struct {
	Server        string        `json:"server"` // the configured name
	Transport     string        `json:"transport"`
	State         string        `json:"state"` // MCPReady, MCPFailed (no tools) or MCPReplayed
	ServerName    string        `json:"server_name,omitempty"`
	ServerVersion string        `json:"server_version,omitempty"`
	Tools         []MCPToolName `json:"tools,omitempty"`
}

// MCPToolName is a tool as offered (mcp__NAME__TOOL) and its server's own
// name for it.
type MCPToolName struct {
	Name string `json:"name"`
	Tool string `json:"tool"`
}

// MCPCall is the MCP detail of a tool result (ToolMeta.MCP).
type MCPCall struct {
	Server        string `json:"server"` // the configured name
	Tool          string `json:"tool"`   // the server's own name for the tool
	ServerName    string `json:"server_name,omitempty"`
	ServerVersion string `json:"server_version,omitempty"`
	// Failure says why the call did not return the server's result:
	// not_started, exited, unreachable, timeout, invalid_response,
	// protocol_error, invalid_arguments, unknown_tool, not_recorded;
	// tool_error when the server's result
	// had isError set; absent for a result.
	Failure string `json:"failure,omitempty"`
	// Bytes is the size of the result as rendered in text, before any cut.
	Bytes int `json:"bytes,omitempty"`
	// Evidence is the id the result's text got (its footer is the
	// output's last line).
	Evidence string `json:"evidence,omitempty"`
}

func init() {
	Register(TypeMCPServer, func() any { return new(MCPServer) })
}
