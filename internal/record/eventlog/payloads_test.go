package eventlog

// Payloads the tests append, shaped as package record's (which imports
// this package, so its own types are out of reach here).

const (
	TypeRunStarted = "run_started"
	TypeToolCall   = "tool_call"
	TypeToolResult = "tool_result"
	TypeFileDelta  = "file_delta"
	TypeWarning    = "warning"
	TypeResumed    = "resumed"
)

type ToolCall struct {
	Turn      int    `json:"turn"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type ToolResult struct {
	Turn       int    `json:"turn"`
	CallID     string `json:"call_id"`
	Name       string `json:"name"`
	IsError    bool   `json:"is_error"`
	Output     string `json:"output"`
	DurationMS int64  `json:"duration_ms"`
}

type FileDelta struct {
	CallID     string `json:"call_id"`
	Path       string `json:"path"`
	Before     string `json:"before,omitempty"`
	After      string `json:"after,omitempty"`
	Bytes      int64  `json:"bytes"`
	Content    string `json:"content,omitempty"`
	ContentRef string `json:"content_ref,omitempty"`
}

type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type RunFinished struct {
	Termination string `json:"termination_reason"`
	Status      string `json:"status"`
}

type Resumed struct {
	AfterSeq int64 `json:"after_seq"`
}
