package record

import "encoding/json"

// Event types of the task contract, the publication plane, the verifier and
// the message plane (R-CONTRACT, R-PUB, R-MSG). User messages and runtime
// observations are distinct types (R-CONTRACT-4).
const (
	TypeContract     = "contract"     // the task contract in force (version 1 at the start, then each revision)
	TypeLease        = "lease"        // publishing lease granted / refused / released
	TypeDelivery     = "delivery"     // the reconciled manifest at the end of the run
	TypeVerification = "verification" // one verifier clause or deliverable check result
	TypeMessage      = "message"      // a user message as delivered
	TypeControl      = "control"      // a control command as applied
	TypeResumed      = "resumed"      // where a resumed run picked up
	TypePrecheck     = "precheck"     // the cheap checks of the deliverables before the final gate
)

// Triggers of a precheck.
const (
	PrecheckTool   = "check_deliverables" // the agent asked
	PrecheckFinish = "finish"             // its finish was refused once for its repair turn
)

// Precheck is a run of the contract's cheap clauses on the deliverables as
// they stood: the delivery as it would reconcile, the deliverable checks,
// the source_alignment clauses and the [K3] citations against the claim
// ledger. Recorded for every check_deliverables call, and when the first
// finish that would fail the final gate is refused (Refused), which gives
// the agent its one repair turn.
type Precheck struct {
	Trigger string `json:"trigger"`
	Checks  int    `json:"checks"`
	// Clauses is how many of Checks were the final gate's costly clauses
	// (tests, recompute, rubric), run at a finish.
	Clauses  int      `json:"clauses,omitempty"`
	Failures []string `json:"failures,omitempty"`
	Refused  bool     `json:"refused,omitempty"`
}

// Contract is the task contract in force: what the user typed (U0) kept
// apart from the normalized objective and the acceptance clauses. The run
// keeps, content-addressed, everything it needs to rebuild and check the
// contract without the task file: the file's text (TaskRef) and every file
// the contract reads — each verifier clause's files, each JSON schema —
// (Files). A revision (a user message that changed the contract) is a new
// contract event with the next Version, the Reason and the message's Text,
// which rebuilds it from the version before.
type Contract struct {
	U0        string          `json:"u0"`
	Objective string          `json:"objective"`
	File      string          `json:"file"`               // the task file's path when the run started ("" for none)
	Hash      string          `json:"hash"`               // sha256 of the canonical contract JSON
	Contract  json.RawMessage `json:"contract"`           // the canonical contract JSON (contract.Contract)
	Version   int             `json:"version,omitempty"`  // absent for the first
	Reason    string          `json:"reason,omitempty"`   // what revised it ("user message M3")
	Message   string          `json:"message,omitempty"`  // the id of the revising message
	Text      string          `json:"text,omitempty"`     // the revising message's text
	TaskRef   string          `json:"task_ref,omitempty"` // blob of the task file's text
	Files     []TaskFile      `json:"files,omitempty"`
}

// TaskFile is one file the contract reads, by its path when the run started
// (absolute, slash-separated), its mode bits and its blob.
type TaskFile struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	Ref  string `json:"ref"`
}

// Lease is a publishing lease granted, refused or released. The envelope's
// agent is who asked; the envelope's time is when.
type Lease struct {
	Action    string            `json:"action"` // granted, refused or released
	Holder    string            `json:"holder,omitempty"`
	Paths     []string          `json:"paths,omitempty"` // asked for (refused), added (granted) or held (released)
	Baselines map[string]string `json:"baselines,omitempty"`
	Reason    string            `json:"reason,omitempty"`
}

// Delivery is the reconciled manifest (R-PUB-4, R-PUB-5).
type Delivery struct {
	Entries []DeliveryEntry `json:"entries"`
	// Undeclared lists what is under /outputs but not in the manifest
	// (scratch excluded): reported, never delivered.
	Undeclared []string `json:"undeclared,omitempty"`
	// OK: the manifest is not empty and every entry was delivered.
	OK bool `json:"ok"`
	// Reason says why OK is false.
	Reason string `json:"reason,omitempty"`
}

// DeliveryEntry is one declared path at reconciliation.
type DeliveryEntry struct {
	Path     string `json:"path"`
	Agent    string `json:"agent"`    // who declared it
	Baseline string `json:"baseline"` // "absent" or a hash
	SHA256   string `json:"sha256,omitempty"`
	Bytes    int64  `json:"bytes"`
	Status   string `json:"status"`           // delivered or failed
	Reason   string `json:"reason,omitempty"` // why it failed
	Detail   string `json:"detail,omitempty"` // the reason in words
}

// Verification is one result of the final gate: a deliverable check (Check
// and Path set) or a verifier clause (Index, Kind, Command, ...).
type Verification struct {
	Check      string `json:"check,omitempty"` // a deliverable constraint: non_empty, ext, ...
	Path       string `json:"path,omitempty"`
	Index      int    `json:"index"`
	Name       string `json:"name,omitempty"`
	Kind       string `json:"kind,omitempty"` // tests or recompute
	Command    string `json:"command,omitempty"`
	Passed     bool   `json:"passed"`
	Detail     string `json:"detail"`
	ExitCode   int    `json:"exit_code,omitempty"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	// MustPass is each must_pass test id's status in the clause's report;
	// Scores a rubric's scores; Pending marks a human clause awaiting
	// review.
	MustPass []TestOutcome `json:"must_pass,omitempty"`
	Scores   []RubricScore `json:"scores,omitempty"`
	Pending  bool          `json:"pending,omitempty"`
}

// TestOutcome is one test's status as a clause's test report gave it
// (passed, failed, skipped, error, or missing when the report lacks it).
type TestOutcome struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// RubricScore is a rubric judge's score of one dimension.
type RubricScore struct {
	Dimension     string  `json:"dimension"`
	Score         float64 `json:"score"`
	Threshold     float64 `json:"threshold"`
	Justification string  `json:"justification,omitempty"`
	Passed        bool    `json:"passed"`
}

// Message is a user message as it was delivered to an agent (To): passed on
// as a user message, applied as a control (Control), or answered by the
// runtime (Answer, a progress query).
type Message struct {
	ID              string `json:"id"`
	Text            string `json:"text"`
	Class           string `json:"class"`
	Sender          string `json:"sender"`
	To              string `json:"to"`
	Original        string `json:"original,omitempty"` // the text as sent, when it was cleaned
	Control         string `json:"control,omitempty"`  // the control kind, when the message was one
	Answer          string `json:"answer,omitempty"`
	ChangesContract bool   `json:"changes_contract,omitempty"`
}

// Control is a control command as applied (pause, resume, cancel, budget).
type Control struct {
	ID     string            `json:"id"`
	Kind   string            `json:"kind"`
	Args   map[string]string `json:"args"`
	Result string            `json:"result"`
}

// Resumed marks where a resumed run picked up.
type Resumed struct {
	AfterSeq         int64               `json:"after_seq"`
	RepairedTornTail bool                `json:"repaired_torn_tail"`
	InFlight         map[string][]string `json:"in_flight"` // per agent, the calls cut off ("name id")
	Reason           string              `json:"reason"`
	// Model is the model this segment calls (--base-url, --model may point
	// a resume elsewhere); absent in records from before it was recorded.
	Model *ModelSettings `json:"model,omitempty"`
	// FollowUp, when a finished run was continued (apodex continue), is
	// the user's follow-up that opened this segment; its message and
	// contract revision follow.
	FollowUp string `json:"follow_up,omitempty"`
}
