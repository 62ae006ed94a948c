package record

import (
	"encoding/json"
	"time"

	"github.com/apodex/apodex/internal/llm"
)

// Event types of an agent's loop and of the run's frame. The payload of
// each is the struct of the same name (see Payload for the full catalogue,
// docs/record.md for every field).
const (
	TypeRunStarted    = "run_started"
	TypeModelRequest  = "model_request"
	TypeModelResponse = "model_response"
	TypeModelRetry    = "model_retry"
	TypeModelError    = "model_error"
	TypeToolCall      = "tool_call"
	TypeToolResult    = "tool_result"
	TypeFileDelta     = "file_delta"
	TypeObservation   = "observation" // a runtime observation shown to an agent
	TypeWarning       = "warning"
	TypeCompaction    = "compaction"
	TypePartialResult = "partial_result"
	TypeRunFinished   = "run_finished"
)

// RunStarted opens the record: everything needed to rebuild the initial state
// and to know what ran.
type RunStarted struct {
	RunID     string            `json:"run_id"`
	Objective string            `json:"objective"`
	Model     ModelSettings     `json:"model"`
	Sandbox   SandboxSettings   `json:"sandbox"`
	Budget    Budget            `json:"budget"`
	Inputs    []FileEntry       `json:"inputs"`
	Tools     []string          `json:"tools"`
	Versions  map[string]string `json:"versions"`
	Settings  *RunSettings      `json:"settings,omitempty"`

	// MCP are the run's MCP servers and the tools each offered (their
	// names are in Tools too): events_mcp.go.
	MCP []MCPOffered `json:"mcp,omitempty"`
}

// ModelSettings names the model and how it was reached (never the key).
type ModelSettings struct {
	Provider  string `json:"provider"`
	Name      string `json:"name,omitempty"`
	BaseURL   string `json:"base_url,omitempty"`
	Stream    bool   `json:"stream"`
	Script    string `json:"script,omitempty"`     // a scripted policy's file when the run started
	ScriptRef string `json:"script_ref,omitempty"` // the blob of that policy, which resume plays
}

// SandboxSettings says how commands were isolated.
type SandboxSettings struct {
	Kind    string `json:"kind"` // "bwrap", "native", "none" or "unavailable"
	Version string `json:"version,omitempty"`
	Network bool   `json:"network"`
	// NetworkMode is "outbound" (own namespace via pasta, no host
	// loopback) or "host" when Network is set.
	NetworkMode string `json:"network_mode,omitempty"`
	// UID is the host uid commands run as (never 0 when isolated).
	UID int `json:"uid,omitempty"`
	// Limits per command (bytes, processes) and how they are enforced.
	MemLimit  int64  `json:"mem_limit,omitempty"`
	PidsLimit int64  `json:"pids_limit,omitempty"`
	TmpSize   int64  `json:"tmp_size,omitempty"`
	Mechanism string `json:"limits_mechanism,omitempty"`
	// Reuse says commands ran in live sandboxes, one per agent's shape of
	// command (sandbox.Reuse), rather than a sandbox per command.
	Reuse bool `json:"reuse,omitempty"`
}

// Budget is the run's limits; zero means unlimited.
type Budget struct {
	MaxTurns     int    `json:"max_turns,omitempty"`
	MaxToolCalls int    `json:"max_tool_calls,omitempty"`
	MaxTokens    int    `json:"max_tokens,omitempty"`
	SoftDeadline string `json:"soft_deadline,omitempty"`
	Timeout      string `json:"timeout,omitempty"`
}

// FileEntry is one file by plane path and content hash.
type FileEntry struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// ModelRequest records the messages a call added to the agent's history since
// its previous call (From is the index of the first), so the full request is
// the concatenation of all of an agent's model_request events.
type ModelRequest struct {
	Turn     int               `json:"turn"`
	From     int               `json:"from"`
	Messages []json.RawMessage `json:"messages"`
	ToolsRef string            `json:"tools_ref,omitempty"`
	// Follows is the seq of the model_response this agent loop received
	// before (absent for a loop's first request), so agents that share an
	// id and run side by side keep their conversations apart.
	Follows int64 `json:"follows,omitempty"`
}

// ModelResponse is one model call's reply and its usage: an assistant turn,
// or (Purpose set, see events_loop.go) a runtime call made for the agent.
type ModelResponse struct {
	Turn         int             `json:"turn"`
	Purpose      string          `json:"purpose,omitempty"`
	Message      json.RawMessage `json:"message"`
	Usage        llm.Usage       `json:"usage"`
	FinishReason string          `json:"finish_reason,omitempty"`
	Model        string          `json:"model,omitempty"`
	DurationMS   int64           `json:"duration_ms"`
	// ResponseID is the provider's id of the reply, when it sent one.
	ResponseID string `json:"response_id,omitempty"`
	// Request is the seq of the model_request this call answered (absent
	// for a summary call, whose prompt is not an agent's history).
	Request int64 `json:"request,omitempty"`
}

// ModelRetry is a failed attempt that will be retried.
type ModelRetry struct {
	Turn    int    `json:"turn"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
	WaitMS  int64  `json:"wait_ms"`
}

// ModelError ends an agent's loop.
type ModelError struct {
	Turn  int    `json:"turn"`
	Error string `json:"error"`
}

// ToolCall is a call as the model made it (arguments verbatim).
type ToolCall struct {
	Turn      int    `json:"turn"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResult is what the model was shown, and where the full body is.
type ToolResult struct {
	Turn       int       `json:"turn"`
	CallID     string    `json:"call_id"`
	Name       string    `json:"name"`
	IsError    bool      `json:"is_error"`
	Output     string    `json:"output"`
	FullRef    string    `json:"full_ref,omitempty"`
	FullBytes  int       `json:"full_bytes,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	Meta       *ToolMeta `json:"meta,omitempty"`
}

// ToolMeta is a tool result's detail for the record: a command's exit code,
// duration and output sizes (bash), a lease's outcome (claim_outputs).
type ToolMeta struct {
	Added         []string `json:"added,omitempty"` // claim_outputs: the paths it declared
	DurationMS    int64    `json:"duration_ms,omitempty"`
	ExitCode      *int     `json:"exit_code,omitempty"` // bash: set whenever the command ran
	Lease         string   `json:"lease,omitempty"`     // claim_outputs: "granted"
	SnapshotError string   `json:"snapshot_error,omitempty"`
	StderrBytes   int64    `json:"stderr_bytes,omitempty"`
	StdoutBytes   int64    `json:"stdout_bytes,omitempty"`
	TimedOut      bool     `json:"timed_out,omitempty"`
	// bash: the host uid the command ran as, and the limit it hit (a
	// limit line names the flag that raises it).
	UID   *int   `json:"uid,omitempty"`
	Limit string `json:"limit,omitempty"`
	// MCP names the server and tool of an MCP tool's call (events_mcp.go).
	MCP *MCPCall `json:"mcp,omitempty"`
}

// FileDelta is one file changed by a tool call. When the new content was
// small enough to keep, it is either in Content itself (short UTF-8 text,
// which saves creating a blob file per step) or in the blob ContentRef, never
// both; an empty file has Bytes 0 and a blob.
type FileDelta struct {
	CallID     string `json:"call_id"`
	Path       string `json:"path"`
	Before     string `json:"before,omitempty"`
	After      string `json:"after,omitempty"`
	Bytes      int64  `json:"bytes"`
	Content    string `json:"content,omitempty"`
	ContentRef string `json:"content_ref,omitempty"`
}

// Observation is a runtime message to an agent (never a user message).
type Observation struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// Warning is something the user must know about the run's guarantees.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WarnInvalidHistory: an agent's history was not a valid conversation
// before a model call (a runtime bug); the clients sent it repaired.
const WarnInvalidHistory = "invalid_history"

// RunFinished closes the record.
type RunFinished struct {
	Termination string      `json:"termination_reason"`
	Status      string      `json:"status"`
	Summary     string      `json:"summary,omitempty"`
	Partial     string      `json:"partial_result,omitempty"`
	Error       string      `json:"error,omitempty"`
	Failures    []string    `json:"failures,omitempty"`
	Turns       int         `json:"turns"`
	ToolCalls   int         `json:"tool_calls"`
	Usage       llm.Usage   `json:"usage"`
	Files       []FileEntry `json:"files"`
	// FilesOmitted counts the files past MaxFilesListed that Files leaves
	// out (the event must fit one record line).
	FilesOmitted int `json:"files_omitted,omitempty"`
	// WorldFiles counts, for a rollout of a stored world, the world's
	// files its terminal /workspace holds unchanged (same content at the
	// same path): Files leaves them out, the world's manifest lists them.
	WorldFiles int       `json:"world_files,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	Time       time.Time `json:"finished_at"`
}

// MaxFilesListed caps the files run_finished lists: a workspace of a
// hundred thousand files would otherwise make a line past MaxLine.
const MaxFilesListed = 10_000

// Compaction is one context compaction (R-CTX-4). Tier 0 records that
// compaction stopped for lack of relief.
type Compaction struct {
	Tier         int         `json:"tier"`
	TokensBefore int         `json:"tokens_before"`
	TokensAfter  int         `json:"tokens_after"`
	Estimated    bool        `json:"estimated"`
	Window       int         `json:"window"`
	Target       int         `json:"target,omitempty"`
	Evicted      []string    `json:"evicted,omitempty"` // call ids whose bodies were stubbed
	Summarized   *Summarized `json:"summarized,omitempty"`
	Stopped      string      `json:"stopped,omitempty"`
	// Reason is empty when the prompt passed the threshold, or
	// ReasonProviderOverflow when the provider refused the prompt as longer
	// than its window; ProviderError is then what it said, and Window the
	// window learned from it.
	Reason        string `json:"reason,omitempty"`
	ProviderError string `json:"provider_error,omitempty"`
}

// ReasonProviderOverflow: a compaction forced by the provider's refusal of
// a prompt longer than the model's context window.
const ReasonProviderOverflow = "provider_overflow"

// Summarized is what tier 2 condensed.
type Summarized struct {
	Messages int    `json:"messages"`
	Summary  string `json:"summary"`
	// Carried is how many protected results (subagent reports) were kept
	// verbatim, as user messages after the summary, their calls summarized.
	Carried int `json:"carried,omitempty"`
}

// PartialResult is the salvage at the soft deadline (R-TIME-3).
type PartialResult struct {
	Text   string `json:"text"`
	Source string `json:"source"` // "model" or "fallback"
	Error  string `json:"error,omitempty"`
}
