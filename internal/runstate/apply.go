package runstate

import (
	"bytes"
	"regexp"
	"slices"

	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
)

// Assignment states that end an assignment.
var endStates = []string{"reported", "failed", "cancelled", "timeout"}

// Control kinds that change the pause state (as inbox names them).
const (
	controlPause  = "pause"
	controlResume = "resume"
	controlCancel = "cancel"
)

func (s *State) apply(e record.Event, p any) error {
	switch p := p.(type) {
	case *record.RunStarted:
		s.Started, s.StartedAt, s.RunID, s.Settings = p, e.Time, p.RunID, p.Settings
	case *record.Contract:
		s.Contracts = append(s.Contracts, ContractVersion{Seq: e.Seq, Contract: *p})
	case *record.ModelRequest:
		s.touch(e, true)
		s.seen(e)
	case *record.ModelResponse:
		// Every call's usage counts, the runtime's own (summary, salvage,
		// verify) too. A summary is no agent's turn; a verifier's replies
		// are the verifier's turns but not the run's.
		a := s.touch(e, true)
		s.Replies++
		s.Usage = addUsage(s.Usage, p.Usage, s.Replies == 1)
		a.Replies++
		a.Usage = addUsage(a.Usage, p.Usage, a.Replies == 1)
		if n := p.Usage.TotalTokens; n != 0 {
			a.Tokens += n
		} else {
			a.Tokens += p.Usage.PromptTokens + p.Usage.CompletionTokens
		}
		if p.Purpose != record.PurposeSummary {
			a.Turns++
			if p.Purpose != record.PurposeVerify {
				s.Turns++
			}
		}
	case *record.Review:
		s.Review = p
	case *record.Evidence:
		if s.EvidenceErr == nil {
			if _, err := evidence.Next(s.Evidence, e, p); err != nil {
				s.EvidenceErr = err
			}
		}
		s.Evidence = append(s.Evidence, *p)
		s.EvidenceAgent[p.ID] = e.Agent
	case *record.CorpusIndex:
		s.Corpus = p
	case *record.ModelError:
		s.touch(e, true).ModelErrors++
	case *record.ModelRetry:
		s.touch(e, false)
	case *record.ToolCall:
		s.touch(e, true).ToolCalls++
		s.ToolCalls++
		s.Steps = append(s.Steps, Step{Seq: e.Seq, CallID: p.CallID, Agent: e.Agent, Turn: p.Turn, Tool: p.Name, Args: clip(p.Arguments, 100)})
	case *record.ToolResult:
		a := s.touch(e, false)
		s.seen(e)
		if p.IsError {
			s.ToolErrors++
			if a != nil {
				a.ToolErrors++
			}
			for i := len(s.Steps) - 1; i >= 0; i-- {
				if s.Steps[i].CallID == p.CallID && s.Steps[i].Agent == e.Agent {
					s.Steps[i].IsError = true
					break
				}
			}
		}
	case *record.Observation:
		s.touch(e, false)
		s.seen(e)
	case *record.FileDelta, *record.PartialResult:
		s.touch(e, false)
	case *record.Compaction:
		s.touch(e, false)
		s.Compactions = append(s.Compactions, *p)
	case *record.Warning:
		s.Warnings = append(s.Warnings, *p)
	case *record.Resumed:
		s.Resumes = append(s.Resumes, *p)
	case *record.RunFinished:
		s.Finished, s.FinishedAt, s.FinishedSeq = p, e.Time, e.Seq
	case *record.Lease:
		s.lease(e, p)
	case *record.Delivery:
		s.Delivery = p
	case *record.Verification:
		s.Checks = append(s.Checks, *p)
	case *record.Message:
		s.Messages = append(s.Messages, Message{Seq: e.Seq, Message: *p})
		if p.Control != "" {
			// The control's arguments are in its text; a budget change sent
			// as a message is re-read from the text by whoever applies it.
			s.control(Control{Seq: e.Seq, ID: p.ID, Kind: p.Control, FromMessage: true})
		}
	case *record.Control:
		s.control(Control{Seq: e.Seq, ID: p.ID, Kind: p.Kind, Args: p.Args})
	case *record.Board:
		return s.board(e, p)
	case *record.Assignment:
		s.assignment(e, p)
	case *record.Report:
		if a := s.assignments[p.Assignment]; a != nil {
			rep := p.ReportBody
			a.Report = &rep
		}
		s.touch(e, false)
	case *record.Planning:
		s.Planning = p.State == "started"
	case *record.Verdict:
		s.Verdicts = append(s.Verdicts, *p)
	case *record.AgentStarted:
		a := s.agents[e.Agent]
		if a == nil {
			a = s.newAgent(e.Agent)
		}
		a.Role, a.Parent, a.Wave = p.Role, p.Parent, p.Wave
	case *record.Effort:
		s.Efforts = append(s.Efforts, *p)
	case *record.Merge:
		s.Merges = append(s.Merges, *p)
		s.touch(e, false)
	default:
		// A type registered by another domain (evidence, and later ones) is
		// folded here once its reader needs it; until then it only counts.
	}
	return nil
}

// views advances the sub-views kept in their own packages.
func (s *State) views(e record.Event, p any) {
	s.Claims.Apply(e, p)
	s.Cited.Apply(e, p)
	if s.FilesErr == nil && s.Files != nil { // nil: not kept (LoadViewFrom)
		if err := s.Files.ApplyPayload(e, p); err != nil {
			s.FilesErr = err
		}
	}
}

// touch marks activity of the event's agent; makes, when loop is set (a
// model or tool call), an agent of it. It returns the agent or nil.
func (s *State) touch(e record.Event, loop bool) *Agent {
	if e.Agent == "" {
		return nil
	}
	a := s.agents[e.Agent]
	if a == nil {
		if !loop {
			return nil
		}
		a = s.newAgent(e.Agent)
	}
	if a.From.IsZero() {
		a.From = e.Time
	}
	a.To = e.Time
	return a
}

func (s *State) newAgent(id string) *Agent {
	a := &Agent{ID: id}
	switch id {
	case "lead":
		a.Role = "lead"
	case "main":
		a.Role = "single"
	}
	s.agents[id] = a
	s.Agents = append(s.Agents, a)
	return a
}

// seen notes the lead's last sight of notices.
func (s *State) seen(e record.Event) {
	if e.Agent == "lead" {
		s.LeadSeen = e.Seq
	}
}

func (s *State) lease(e record.Event, p *record.Lease) {
	s.Lease.Events = append(s.Lease.Events, LeaseEvent{Seq: e.Seq, Agent: e.Agent, Lease: *p})
	switch p.Action {
	case "granted":
		s.Lease.Holder = p.Holder
		if s.Lease.Holder == "" {
			s.Lease.Holder = e.Agent
		}
		for _, path := range p.Paths {
			if !slices.Contains(s.Lease.Manifest, path) {
				s.Lease.Manifest = append(s.Lease.Manifest, path)
			}
		}
		slices.Sort(s.Lease.Manifest)
	case "released":
		if s.Lease.Holder == e.Agent || s.Lease.Holder == p.Holder {
			s.Lease.Holder = ""
		}
	}
}

func (s *State) control(c Control) {
	s.Controls = append(s.Controls, c)
	switch c.Kind {
	case controlPause:
		s.Paused = true
	case controlResume, controlCancel:
		s.Paused = false
	}
}

func (s *State) board(e record.Event, p *record.Board) error {
	s.BoardEvents++
	if s.BoardErr != nil {
		return nil // the board stopped at the first event it refused
	}
	if err := s.Board.Apply(s.Board.Seq()+1, *p); err != nil {
		s.BoardErr = &BoardError{Seq: e.Seq, Op: p.Op, ID: p.ID, Err: err}
	}
	return nil
}

// BoardError is a board event the board refused.
type BoardError struct {
	Seq    int64
	Op, ID string
	Err    error
}

func (e *BoardError) Error() string {
	return "board event at record seq " + itoa(e.Seq) + " (" + e.Op + " " + e.ID + "): " + e.Err.Error()
}

func (e *BoardError) Unwrap() error { return e.Err }

func (s *State) assignment(e record.Event, p *record.Assignment) {
	a := s.assignments[p.Assignment]
	if a == nil {
		a = &Assignment{Assignment: record.Assignment{Assignment: p.Assignment}, Lifecycle: []string{}}
		s.assignments[p.Assignment] = a
		s.Assignments = append(s.Assignments, a)
	}
	if p.Item != "" {
		a.Item = p.Item
	}
	if p.Role != "" {
		a.Role = p.Role
	}
	if p.Instructions != "" {
		a.Instructions = p.Instructions
	}
	if p.Tools != nil {
		a.Tools = p.Tools
	}
	if p.CallID != "" {
		a.CallID = p.CallID
	}
	if p.Reason != "" { // the reason of the last change that gave one
		a.Reason = p.Reason
	}
	if p.State != "" {
		a.State = p.State
		a.Lifecycle = append(a.Lifecycle, p.State)
	}
	if slices.Contains(endStates, p.State) {
		a.EndedSeq = e.Seq
	}
	// The subagent's own view: created by the lead, it belongs to the
	// subagent; its queueing is not activity.
	ag := s.agents[p.Assignment]
	if ag == nil {
		ag = s.newAgent(p.Assignment)
	}
	if p.State == "created" {
		ag.Parent = e.Agent // the lead that dispatched it
	}
	ag.Role, ag.Item, ag.State = a.Role, a.Item, a.State
	if p.Reason != "" {
		ag.Reason = p.Reason
	}
	switch p.State {
	case "created":
	case "queued":
		ag.Queued = e.Time
	default:
		if ag.From.IsZero() {
			ag.From = e.Time
		}
		ag.To = e.Time
	}
}

// blobRef finds the blob references of an event at any depth (full_ref,
// content_ref, tools_ref, task_ref, …).
var blobRef = regexp.MustCompile(`"[a-z_]*_ref":"(sha256:[0-9a-f]{64})"`)

func (s *State) blobRefs(e record.Event) {
	if !bytes.Contains(e.Raw, []byte(`_ref":"sha256:`)) {
		return
	}
	for _, m := range blobRef.FindAllSubmatch(e.Raw, -1) {
		if _, ok := s.Blobs[string(m[1])]; !ok {
			s.Blobs[string(m[1])] = e.Seq
		}
	}
}
