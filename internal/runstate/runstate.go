// Package runstate is the one projection of a run's record: a left fold of
// its events into the run's state — settings, contract versions, the task
// board and the assignments, every agent's activity and usage, the lease and
// the manifest, the delivery, the checks and verdicts, the messages and
// controls, the evidence and where it is cited, the claim facts (the
// ledger derives from them), the files W_t, the resumes and the
// termination. Every reader of a run (resume, show, status, board, runs,
// replay, the web page) reads this state instead of folding events itself.
// The sub-views kept in their own packages (claims.Facts, state.State,
// evidence.Cited) are advanced by the same Apply, from the payload it
// decoded once (record.DecodePayload).
//
// The state is kept live three ways: Load then Refresh (another process's
// run: Refresh reads only what was appended), LoadEach (the same, with a
// callback per event for what a reader keeps beside the state), and Live
// (the run whose log is open in this process: record.Log.Cursor, no file
// read after the catch-up).
//
// Guarantees:
//   - Apply takes events in seq order (1, 2, 3, …) and refuses any other;
//     the same events give the same state, with no clock, no file system and
//     no map iteration in what it builds;
//   - an event type this version does not know is not an error: Apply notes
//     it in Unknown (type and seq) and goes on; Load adds a warning for it;
//     whoever must not go past it (resume) checks Unknown;
//   - a known event whose payload does not decode is refused with an error
//     naming its seq and type, and changes nothing;
//   - Usage sums the model_response events of every agent (main or lead,
//     subagents, verifier, summarizer, salvage), per agent and in total,
//     prompt and completion apart;
//   - Load streams the record: it holds one line at a time (lines are capped
//     at record.MaxLine), never the whole file.
package runstate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/state"
)

// ErrOrder: an event was applied out of seq order.
var ErrOrder = errors.New("runstate: event out of seq order")

// State is a run as its record says so far. Read it; advance it with Apply.
type State struct {
	RunID     string              `json:"run_id"`
	Started   *record.RunStarted  `json:"started,omitempty"`
	StartedAt time.Time           `json:"started_at"`
	Settings  *record.RunSettings `json:"settings,omitempty"`
	// Contracts is every version of the contract in force, in order; the
	// last one is current (Contract).
	Contracts []ContractVersion `json:"contracts,omitempty"`

	// Board is the task board (empty for a react run); BoardEvents counts
	// its events and BoardErr is the first board event the board refused.
	Board       *board.Board  `json:"-"`
	BoardEvents int           `json:"board_events"`
	BoardErr    error         `json:"-"`
	Assignments []*Assignment `json:"assignments,omitempty"`
	// Agents is every agent that ran a loop or was assigned, in order of
	// first appearance.
	Agents   []*Agent         `json:"agents"`
	Planning bool             `json:"planning"` // the lead is in planning mode
	Verdicts []record.Verdict `json:"verdicts,omitempty"`
	Merges   []record.Merge   `json:"merges,omitempty"`
	// Efforts is every effort event (waves, investigators, outcomes).
	Efforts []record.Effort `json:"efforts,omitempty"`

	Lease Lease `json:"lease"`
	// Delivery is the reconciled manifest; Checks every deliverable check
	// and verifier clause result, in order.
	Delivery *record.Delivery      `json:"delivery,omitempty"`
	Checks   []record.Verification `json:"checks,omitempty"`

	// Messages is every user message as delivered, Controls every control
	// applied — sent as a control or inside a message — in order.
	Messages []Message `json:"messages,omitempty"`
	Controls []Control `json:"controls,omitempty"`
	Paused   bool      `json:"paused"`

	// Usage sums every model response, the runtime's own calls included;
	// Replies counts them, Turns only the agents' own replies (not
	// compaction summaries or verifier calls).
	Usage       llm.Usage           `json:"usage"`
	Replies     int                 `json:"replies"`
	Turns       int                 `json:"turns"`
	ToolCalls   int                 `json:"tool_calls"`
	ToolErrors  int                 `json:"tool_errors"`
	Steps       []Step              `json:"steps"`
	Compactions []record.Compaction `json:"compactions,omitempty"`
	Warnings    []record.Warning    `json:"warnings,omitempty"`
	Resumes     []record.Resumed    `json:"resumes,omitempty"`

	// Evidence is Q, the retrieved evidence, in id order (texts longer
	// than the inline limit are blobs: internal/evidence reads them);
	// Corpus is how the corpus index was obtained.
	Evidence []record.Evidence   `json:"evidence,omitempty"`
	Corpus   *record.CorpusIndex `json:"corpus,omitempty"`
	// EvidenceAgent is the agent that retrieved each evidence id;
	// EvidenceErr the first evidence event whose id was out of sequence (the
	// record was edited). Cited is where the record cites each id.
	EvidenceAgent map[string]string `json:"evidence_agent,omitempty"`
	EvidenceErr   error             `json:"-"`
	Cited         evidence.Cited    `json:"cited,omitempty"`

	// Claims is what the record says about claims: Claims.Ledger() is the
	// claim ledger.
	Claims *claims.Facts `json:"claims"`
	// Files is W_t = (F, Q, C, I, G, K): the files, their producers and
	// provenance; FilesErr the first event it refused (it stops there).
	Files    *state.State `json:"files"`
	FilesErr error        `json:"-"`

	// Review is a person's decision on a run awaiting review (the last
	// one), appended after run_finished.
	Review *record.Review `json:"review,omitempty"`

	Finished    *record.RunFinished `json:"finished,omitempty"`
	FinishedAt  time.Time           `json:"finished_at,omitzero"`
	FinishedSeq int64               `json:"finished_seq,omitempty"`

	// Unknown lists events of types this version does not know.
	Unknown []Unknown `json:"unknown,omitempty"`
	// Blobs is every blob reference the record makes, with the first seq
	// that makes it.
	Blobs map[string]int64 `json:"-"`

	Seq      int64     `json:"seq"` // of the last event applied
	LastTime time.Time `json:"last_time"`
	// LeadSeen is the seq of the lead's last sight of notices (its last
	// model request, tool result or observation).
	LeadSeen int64 `json:"-"`

	agents      map[string]*Agent
	assignments map[string]*Assignment
}

// ContractVersion is one contract event.
type ContractVersion struct {
	Seq int64 `json:"seq"`
	record.Contract
}

// Assignment is one assignment's lifecycle.
type Assignment struct {
	record.Assignment
	// Reason is that of the last state change that gave one.
	Lifecycle []string           `json:"lifecycle"` // every state in order: created, queued, …
	Report    *record.ReportBody `json:"report,omitempty"`
	EndedSeq  int64              `json:"ended_seq,omitempty"` // the seq of its last state, once it ended
}

// Ended reports whether the assignment reached a final state.
func (a *Assignment) Ended() bool { return a.EndedSeq > 0 }

// Agent is what one agent did.
type Agent struct {
	ID string `json:"agent"` // "main", "lead", "A1", "V1", "I1", "W1", …
	// Role, Item, State and Reason come from a subagent's assignment; Role
	// and Parent of an agent the runtime started from its agent_started
	// event (the lead's and the single agent's role is their id's).
	Role   string `json:"role,omitempty"`
	Parent string `json:"parent,omitempty"`
	Item   string `json:"item,omitempty"`
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Queued is when a subagent was queued; From and To its first and last
	// event after that: the span it was active.
	Queued      time.Time `json:"queued,omitzero"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Turns       int       `json:"turns"`   // its own replies (not compaction summaries)
	Replies     int       `json:"replies"` // every model response it is charged with
	ToolCalls   int       `json:"tool_calls"`
	ToolErrors  int       `json:"tool_errors"`
	ModelErrors int       `json:"model_errors,omitempty"`
	Usage       llm.Usage `json:"usage"`
	// Tokens sums its responses' tokens, each its total or, when the
	// provider reported none, prompt + completion.
	Tokens int `json:"tokens,omitempty"`
	// Wave is the effort wave that started it (0: none).
	Wave int `json:"wave,omitempty"`
}

// Lease is the publishing lease and the manifest.
type Lease struct {
	Holder   string       `json:"holder,omitempty"` // "" when free
	Manifest []string     `json:"manifest"`         // every declared path, sorted
	Events   []LeaseEvent `json:"events,omitempty"`
}

// LeaseEvent is one lease event with who asked.
type LeaseEvent struct {
	Seq   int64  `json:"seq"`
	Agent string `json:"agent"`
	record.Lease
}

// Message is one user message as delivered.
type Message struct {
	Seq int64 `json:"seq"`
	record.Message
}

// Control is one control applied: from a control event, or a message that
// was a control (FromMessage).
type Control struct {
	Seq         int64             `json:"seq"`
	ID          string            `json:"id"`
	Kind        string            `json:"kind"`
	Args        map[string]string `json:"args,omitempty"`
	FromMessage bool              `json:"from_message,omitempty"`
}

// Step is one tool call.
type Step struct {
	Seq     int64  `json:"seq"`
	CallID  string `json:"call_id"`
	Agent   string `json:"agent"`
	Turn    int    `json:"turn"`
	Tool    string `json:"tool"`
	Args    string `json:"arguments"`
	IsError bool   `json:"is_error"`
}

// Unknown is an event of a type this version does not know.
type Unknown struct {
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
}

// New returns the state before the first event.
func New() *State {
	return &State{Board: &board.Board{}, Agents: []*Agent{}, Steps: []Step{}, Lease: Lease{Manifest: []string{}},
		Blobs: map[string]int64{}, agents: map[string]*Agent{}, assignments: map[string]*Assignment{},
		EvidenceAgent: map[string]string{}, Cited: evidence.Cited{}, Claims: claims.NewFacts(), Files: state.New()}
}

// Contract is the contract in force (nil before the first contract event).
func (s *State) Contract() *ContractVersion {
	if len(s.Contracts) == 0 {
		return nil
	}
	return &s.Contracts[len(s.Contracts)-1]
}

// Agent returns the agent with that id, or nil.
func (s *State) Agent(id string) *Agent { return s.agents[id] }

// AssignmentByID returns the assignment with that id, or nil.
func (s *State) AssignmentByID(id string) *Assignment { return s.assignments[id] }

// Mode is "team" when the run's first agent had the lead's tools, "react"
// otherwise, "" before run_started.
func (s *State) Mode() string {
	switch {
	case s.Started == nil:
		return ""
	case slices.Contains(s.Started.Tools, "dispatch"):
		return "team"
	}
	return "react"
}

// Apply folds one event into the state and every sub-view (the board,
// the claims, the evidence and its citations, the files W_t): the one
// place a run's events are folded.
func (s *State) Apply(e record.Event) error {
	if e.Seq != s.Seq+1 {
		return fmt.Errorf("%w: seq %d after %d", ErrOrder, e.Seq, s.Seq)
	}
	if !record.Known(e.Type) {
		s.Unknown = append(s.Unknown, Unknown{Seq: e.Seq, Type: e.Type})
		s.advance(e)
		return nil
	}
	p, err := record.DecodePayload(e)
	if err != nil {
		return err
	}
	if err := s.apply(e, p); err != nil {
		return fmt.Errorf("runstate: %s event at seq %d: %w", e.Type, e.Seq, err)
	}
	s.views(e, p)
	s.blobRefs(e)
	s.advance(e)
	return nil
}

func (s *State) advance(e record.Event) {
	s.Seq, s.LastTime = e.Seq, e.Time
}
