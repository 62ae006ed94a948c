package record

// Event types of an Agent Team (SPEC §6–8).
const (
	TypeBoard      = "board"      // one task board mutation
	TypeAssignment = "assignment" // an assignment's creation or state change
	TypeReport     = "report"     // a subagent's report
	TypePlanning   = "planning"   // the lead entered or left planning mode
	TypeVerdict    = "verdict"    // the verifier's verdict on one claim
	TypeMerge      = "merge"      // a subagent's worktree merged into the shared workspace
	// TypeAgentStarted: the runtime started an agent of its own (a
	// verifier, an effort investigator, the synthesis writer).
	TypeAgentStarted = "agent_started"
)

// AgentStarted is an agent the runtime started rather than the lead's
// dispatch: a verifier (V1, V2, …), an effort investigator (I1, …) or the
// synthesis writer (W1, …). The event's agent is the new agent's id, unique
// in the run, so concurrent verifiers never share one.
type AgentStarted struct {
	Role   string `json:"role"`              // verifier, investigator or writer
	Parent string `json:"parent"`            // the agent it works for (lead)
	CallID string `json:"call_id,omitempty"` // the parent's tool call that started it (verify)
	Claim  string `json:"claim,omitempty"`   // the ledger claim it checks or investigates (K3)
	Wave   int    `json:"wave,omitempty"`    // the effort wave that started it
}

// RuntimeVerifier reports whether an agent id is a verifier's: V1, V2, …,
// or "verifier" (records written before verifiers had their own ids).
func RuntimeVerifier(id string) bool {
	if id == "verifier" {
		return true
	}
	if len(id) < 2 || id[0] != 'V' {
		return false
	}
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Board is one board mutation. Which fields matter depends on Op (add,
// update, resolve, cancel, reopen, assign, unassign, attach). In an update,
// nil Title, Objective or Deps mean unchanged; a non-nil empty Deps clears
// the deps (it is encoded as [], absent as nothing).
type Board struct {
	Op        string   `json:"op"`
	ID        string   `json:"id"`
	Title     *string  `json:"title,omitempty"`
	Objective *string  `json:"objective,omitempty"`
	Deps      []string `json:"deps,omitzero"`
	Group     string   `json:"group,omitempty"`
	Note      string   `json:"note,omitempty"` // resolve note, cancel or reopen reason
	Refs      []string `json:"refs,omitempty"`
	Owner     string   `json:"owner,omitempty"`    // assign, unassign
	By        string   `json:"by,omitempty"`       // an agent, "user" or "runtime"
	Reopened  []string `json:"reopened,omitempty"` // descendants reopened along with ID
	// CallID is the tool call that caused the event, when one did (the
	// runtime's record of effects; the board's fold ignores it).
	CallID string `json:"call_id,omitempty"`
}

// Assignment is an assignment's creation (State "created", with its role,
// instructions and tools, recorded by the lead) or a change of its state
// (recorded by the assignment itself).
type Assignment struct {
	Assignment   string   `json:"assignment"`
	Item         string   `json:"item"`
	Role         string   `json:"role,omitempty"`
	Instructions string   `json:"instructions,omitempty"`
	Tools        []string `json:"tools,omitempty"`
	State        string   `json:"state"`
	Reason       string   `json:"reason,omitempty"`
	CallID       string   `json:"call_id,omitempty"` // the dispatch call that created it
}

// Values of Assignment.State (R-EXEC-1): created → queued → running →
// reported, or failed, cancelled or timeout with a Reason.
const (
	AssignmentCreated   = "created"
	AssignmentQueued    = "queued"
	AssignmentRunning   = "running"
	AssignmentReported  = "reported"
	AssignmentFailed    = "failed"
	AssignmentCancelled = "cancelled"
	AssignmentTimeout   = "timeout"
)

// ReasonLeadDone begins the Reason of an assignment cancelled because the
// lead ended.
const ReasonLeadDone = "team: the lead finished"

// Report is how a subagent ended its assignment (R-TEAM-2).
type Report struct {
	Assignment string `json:"assignment"`
	Item       string `json:"item"`
	ReportBody
}

// ReportBody is a subagent's report as it made it.
type ReportBody struct {
	Summary       string        `json:"summary"`
	Claims        []ReportClaim `json:"claims,omitempty"`
	Artifacts     []string      `json:"artifacts,omitempty"`
	OpenQuestions []string      `json:"open_questions,omitempty"`
}

// ReportClaim is one statement of a report with the evidence that supports
// it; the claim ledger gives it an id (a claim event).
type ReportClaim struct {
	Text     string   `json:"text"`
	Evidence []string `json:"evidence,omitempty"`
}

// Planning says the lead entered (State "started") or left ("finished")
// planning mode.
type Planning struct {
	Mode  string `json:"mode"` // "planning"
	State string `json:"state"`
}

// Verdict is what the verifier said of one claim.
type Verdict struct {
	Claim    string `json:"claim"`
	ClaimID  string `json:"claim_id,omitempty"` // the ledger's K id, when a report stated it
	Item     string `json:"item,omitempty"`     // the board item the claim is attached to
	Verdict  string `json:"verdict"`            // supported, refuted, insufficient, format_violation
	Location string `json:"location,omitempty"`
	Repair   string `json:"repair,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Checks is what the verifier ran or read.
	Checks []string `json:"checks,omitempty"`
	// Cut says what of the evidence did not reach the verifier's prompt
	// whole (a directory, a missing file, a file over the budget).
	Cut []string `json:"cut,omitempty"`
	// Evidence are the refs it was given.
	Evidence []string `json:"evidence,omitempty"`
}

// Merge is a subagent's worktree merged into the shared workspace: what was
// applied, what conflicted, what was refused, or why the merge failed.
type Merge struct {
	Assignment string          `json:"assignment"`
	Applied    []MergeChange   `json:"applied,omitempty"`
	Conflicts  []MergeConflict `json:"conflicts,omitempty"`
	Refused    []MergeRefusal  `json:"refused,omitempty"`
	// Ignored are changed paths the merge's ignore list left out.
	Ignored []string `json:"ignored,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// MergeChange is one applied change (paths relative to /workspace).
type MergeChange struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Hash   string `json:"hash,omitempty"`
	Target string `json:"target,omitempty"`
}

// MergeConflict is a change the shared workspace kept its own version of.
type MergeConflict struct {
	Path       string `json:"path"`
	Reason     string `json:"reason"`
	TheirsHash string `json:"theirs_hash,omitempty"`
	OursHash   string `json:"ours_hash,omitempty"`
	Copy       string `json:"copy,omitempty"`
}

// MergeRefusal is a change that was not applied.
type MergeRefusal struct {
	Path   string `json:"path"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}
