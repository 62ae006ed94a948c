package record

import "encoding/json"

// Event types of the claim ledger and of adaptive effort (SPEC R-VERIFY-1,
// R-EFFORT-1, R-SYNTH-1). The ledger itself is a fold over these events and
// the verdicts, reports and board events (internal/claims).
const (
	// TypeClaim gives one claim of a report its stable id; payload Claim.
	TypeClaim = "claim"
	// TypeEffort is one step of an effort wave; payload Effort.
	TypeEffort = "effort"
	// TypeClaimMark is the lead's mark on one claim; payload ClaimMark.
	TypeClaimMark = "claim_mark"
	// TypeCitations is what one deliverable cites; payload Citations.
	TypeCitations = "citations"
)

// ClaimMark is the lead's judgement of what one claim weighs (mark_claim):
// side (the deliverables do not rest on it), load_bearing (they do), or
// withdrawn (it no longer counts: not load-bearing, never blocks finish).
// The latest mark of a claim holds.
type ClaimMark struct {
	Claim  string `json:"claim"` // K3
	Mark   string `json:"mark"`  // side, load_bearing or withdrawn
	Reason string `json:"reason"`
	CallID string `json:"call_id,omitempty"` // the lead's mark_claim call
}

// Citations is what one deliverable cites, as the runtime read it when the
// lead asked to finish (and after the writer): the claim ids [K3] and
// evidence ids [E7] in its text. Recorded when the file changed since the
// last reading; the latest one of a path holds.
type Citations struct {
	Path     string   `json:"path"`
	Hash     string   `json:"hash"` // sha256:<hex> of the content read
	Claims   []string `json:"claims,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
}

// Claim is one claim of a report, as the ledger knows it.
type Claim struct {
	ID         string   `json:"id"`        // K1, K2, … in record order
	Text       string   `json:"text"`      // as the agent stated it
	StatedBy   string   `json:"stated_by"` // the agent (A1, I1, …); also the event's agent
	Item       string   `json:"item,omitempty"`
	Evidence   []string `json:"evidence,omitempty"`
	Artifacts  []string `json:"artifacts,omitempty"` // the report's artifacts
	Assignment string   `json:"assignment,omitempty"`
}

// Effort phases.
const (
	EffortWave         = "wave"         // a wave starts: its targets
	EffortInvestigator = "investigator" // one investigator ended
	EffortOutcome      = "outcome"      // a wave ended: each target's status
	EffortBudget       = "budget"       // no wave: effort's token budget is spent
)

// Effort is one step of adaptive Max Team Effort.
type Effort struct {
	Phase  string   `json:"phase"`
	Wave   int      `json:"wave"`
	Claims []string `json:"claims,omitempty"` // the targets (K ids)
	// Reasons says why each target is one: disputed, unresolved or
	// insufficient (its latest verdict).
	Reasons      map[string]string `json:"reasons,omitempty"`
	Claim        string            `json:"claim,omitempty"`
	Investigator string            `json:"investigator,omitempty"`
	Framing      string            `json:"framing,omitempty"`
	// State is how the investigator ended (reported, or the termination).
	State string `json:"state,omitempty"`
	// Usage is what the investigator's model calls cost.
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
	Turns            int `json:"turns,omitempty"`
	// Statuses maps each target to its status after the wave.
	Statuses map[string]string `json:"statuses,omitempty"`
	// RunTokens is what the run's model calls had cost before the wave,
	// effort's own excluded; BudgetTokens effort's budget (its share of
	// RunTokens, --effort-budget; 0: unbounded); SpentTokens what effort's
	// agents had spent (before the wave, or after it in an outcome).
	RunTokens    int `json:"run_tokens,omitempty"`
	BudgetTokens int `json:"budget_tokens,omitempty"`
	SpentTokens  int `json:"spent_tokens,omitempty"`
}

// TypeSynthesis is one step of synthesis (R-SYNTH-1/2); payload Synthesis.
const TypeSynthesis = "synthesis"

// Synthesis phases.
const (
	SynthesisGraph   = "graph"   // pass 1: the claim–evidence graph
	SynthesisRequest = "request" // the writer asked for evidence: a board item
	SynthesisCheck   = "check"   // after the writer: its citations checked
)

// Synthesis is one step of synthesis.
type Synthesis struct {
	Phase string `json:"phase"`
	// Graph is the claim–evidence graph (internal/claims.Ledger as JSON).
	Graph     json.RawMessage `json:"graph,omitempty"`
	Reports   []string        `json:"reports,omitempty"`
	Artifacts []string        `json:"artifacts,omitempty"`
	// Existing is the hash of each report that already existed when the
	// writer started (it revises those).
	Existing map[string]string `json:"existing,omitempty"`
	// Claim, Reason and Item describe a request_evidence.
	Claim  string `json:"claim,omitempty"`
	Reason string `json:"reason,omitempty"`
	Item   string `json:"item,omitempty"`
	// Citations counts what the check resolved; Failures says, with the
	// line, what it did not.
	Citations int      `json:"citations,omitempty"`
	Failures  []string `json:"failures,omitempty"`
}

// TypeReview is a person's decision on a run awaiting review (a human
// clause, R-VERIFY-2), appended after run_finished; payload Review.
const TypeReview = "review"

// Review decisions.
const (
	ReviewApproved = "approved"
	ReviewRejected = "rejected"
)

// Review is one decision of apodex review.
type Review struct {
	Decision string `json:"decision"`
	Note     string `json:"note,omitempty"`
	By       string `json:"by,omitempty"`
}

func init() {
	Register(TypeClaim, func() any { return new(Claim) })
	Register(TypeEffort, func() any { return new(Effort) })
	Register(TypeClaimMark, func() any { return new(ClaimMark) })
	Register(TypeCitations, func() any { return new(Citations) })
	Register(TypeSynthesis, func() any { return new(Synthesis) })
	Register(TypeReview, func() any { return new(Review) })
}
