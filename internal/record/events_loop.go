package record

// Event types of the agent loop's semantics (beyond requests and replies).
const (
	// TypeTextFinish: an agent answered without a tool call a second time
	// in a row, after a nudge; its text was offered to the final gate as
	// the finish summary.
	TypeTextFinish = "text_finish"
)

// TextFinish is a tool-free reply taken as finish. Accepted is false when
// the final gate refused it (Refused says why); the agent then goes on.
type TextFinish struct {
	Turn     int    `json:"turn"`
	Summary  string `json:"summary"`
	Accepted bool   `json:"accepted"`
	Refused  string `json:"refused,omitempty"`
}

// Purposes of a model_response that is not an agent's turn: the runtime's
// own calls, on behalf of the agent named by the event.
const (
	PurposeSummary  = "summary"  // a compaction summary (role summarizer)
	PurposeFinalize = "finalize" // the salvage call at the soft deadline
	PurposeVerify   = "verify"   // one claim sent to the verifier
)

func init() {
	Register(TypeTextFinish, func() any { return new(TextFinish) })
}
