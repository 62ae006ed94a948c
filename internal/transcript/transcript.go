// Package transcript turns a run's record into what people read: the
// assistant's words, each tool call with its arguments and output, user
// messages with their class, runtime observations, controls, compactions,
// board mutations, verdicts and the delivery.
//
// Guarantees:
//   - Entries is a pure function of one event (and, with Full, of the blob
//     store): the same record always gives the same transcript, whether read
//     whole or followed live;
//   - every event type yields entries in words or is named in Quiet
//     (bookkeeping a reader does not need: model requests, file deltas);
//     a call cut off by a stop of the process is an "interrupted" entry
//     of its agent, where the record says the run resumed; an event
//     type this version does not know becomes one "event" entry, never an
//     error, so a newer record still reads;
//   - outputs are what the model was shown; with Full, a result whose body
//     was clipped for the model is read whole from its blob.
package transcript

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
)

// Entry kinds.
const (
	KindRunStarted   = "run_started"
	KindContract     = "contract"
	KindAssistant    = "assistant"
	KindToolCall     = "tool_call"
	KindToolResult   = "tool_result"
	KindRetry        = "retry"
	KindModelError   = "model_error"
	KindUser         = "user"
	KindObservation  = "observation"
	KindControl      = "control"
	KindCompaction   = "compaction"
	KindBoard        = "board"
	KindAssignment   = "assignment"
	KindAgent        = "agent" // the runtime started an agent (V1, I1, W1)
	KindReport       = "report"
	KindVerdict      = "verdict"
	KindLease        = "lease"
	KindWarning      = "warning"
	KindPartial      = "partial_result"
	KindDelivery     = "delivery"
	KindVerification = "verification"
	KindResumed      = "resumed"
	KindRunFinished  = "run_finished"
	KindEvent        = "event" // a type this version does not render
)

// Quiet are the event types that give no entry: a model request repeats
// what the transcript already shows, a file delta is in the call's result.
var Quiet = []string{record.TypeModelRequest, record.TypeFileDelta}

// Entry is one readable item of a transcript.
type Entry struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Agent  string    `json:"agent,omitempty"`
	Kind   string    `json:"kind"`
	Turn   int       `json:"turn,omitempty"`
	Text   string    `json:"text,omitempty"` // words: assistant, user, observation, summary
	Tool   string    `json:"tool,omitempty"`
	CallID string    `json:"call_id,omitempty"`
	Args   string    `json:"arguments,omitempty"`
	Output string    `json:"output,omitempty"`
	Error  bool      `json:"is_error,omitempty"`
	// FullBytes is the size of the whole body when Output is clipped.
	FullBytes int    `json:"full_bytes,omitempty"`
	Class     string `json:"class,omitempty"` // a user message's class
	// Detail is the rest in one line: a control's result, a board op, a
	// verdict's reason, a run's termination.
	Detail string `json:"detail,omitempty"`
	Tokens int    `json:"tokens,omitempty"` // a model turn's total tokens
	// Lines are extra rows: delivery entries, contract deliverables.
	Lines []string `json:"lines,omitempty"`
}

// Options shape the entries.
type Options struct {
	// Full reads clipped tool results whole from the blobs under Dir.
	Full bool
	Dir  string
}

// Entries renders one event.
func Entries(e record.Event, opt Options) []Entry {
	p, _ := record.DecodePayload(e) // nil when it does not decode
	return EntriesOf(e, p, opt)
}

// EntriesOf renders one event whose payload p is decoded already
// (record.DecodePayload; nil when it did not decode).
func EntriesOf(e record.Event, p any, opt Options) []Entry {
	base := Entry{Seq: e.Seq, Time: e.Time, Agent: e.Agent}
	one := func(f func(*Entry)) []Entry { x := base; f(&x); return []Entry{x} }
	if p == nil {
		// A type this version does not know, or a payload that does not
		// decode: the event is named, never an error.
		return one(func(x *Entry) { x.Kind, x.Detail = KindEvent, e.Type })
	}
	switch p := p.(type) {
	case *record.ModelRequest, *record.FileDelta: // Quiet
		return nil
	case *record.RunStarted:
		return one(func(x *Entry) {
			x.Kind, x.Text = KindRunStarted, p.Objective
			x.Detail = fmt.Sprintf("run %s: model %s, sandbox %s", p.RunID, strings.TrimSpace(p.Model.Provider+" "+p.Model.Name+" "+p.Model.BaseURL), p.Sandbox.Kind)
		})
	case *record.Contract:
		var c struct { // the canonical contract JSON: what a reader is shown of it
			Objective    string `json:"objective"`
			Deliverables []struct {
				Path string `json:"path"`
			} `json:"deliverables"`
		}
		json.Unmarshal(p.Contract, &c)
		return one(func(x *Entry) {
			x.Kind, x.Text = KindContract, c.Objective
			x.Detail = "contract"
			if p.File != "" {
				x.Detail += " from " + p.File
			}
			if p.Version > 0 {
				x.Detail = fmt.Sprintf("contract version %d (%s)", p.Version, p.Reason)
			}
			for _, d := range c.Deliverables {
				x.Lines = append(x.Lines, "deliverable "+d.Path)
			}
		})
	case *record.ModelResponse:
		var m llm.Message
		json.Unmarshal(p.Message, &m)
		return one(func(x *Entry) {
			x.Kind, x.Turn, x.Text, x.Tokens = KindAssistant, p.Turn, strings.TrimSpace(m.Content), p.Usage.TotalTokens
			x.Detail = p.FinishReason
		})
	case *record.ToolCall:
		return one(func(x *Entry) {
			x.Kind, x.Turn, x.Tool, x.CallID, x.Args = KindToolCall, p.Turn, p.Name, p.CallID, p.Arguments
		})
	case *record.ToolResult:
		return one(func(x *Entry) {
			x.Kind, x.Turn, x.Tool, x.CallID, x.Output, x.Error = KindToolResult, p.Turn, p.Name, p.CallID, p.Output, p.IsError
			if p.FullRef != "" && p.FullBytes > len(p.Output) {
				x.FullBytes = p.FullBytes
				if opt.Full {
					body, err := readBlob(opt.Dir, p.FullRef)
					if err != nil {
						body = x.Output + "\n(the whole output was not read: " + err.Error() + ")"
					}
					x.Output, x.FullBytes = body, 0
				}
			}
		})
	case *record.ModelRetry:
		return one(func(x *Entry) {
			x.Kind, x.Turn = KindRetry, p.Turn
			x.Detail = fmt.Sprintf("attempt %d failed, retrying in %s: %s", p.Attempt, time.Duration(p.WaitMS)*time.Millisecond, oneLine(p.Error))
		})
	case *record.ModelError:
		return one(func(x *Entry) { x.Kind, x.Turn, x.Detail, x.Error = KindModelError, p.Turn, oneLine(p.Error), true })
	case *record.Message:
		return one(func(x *Entry) {
			x.Kind, x.Text, x.Class = KindUser, p.Text, p.Class
			if p.To != "" { // the message is part of its recipient's conversation
				x.Agent = p.To
			}
			x.Detail = strings.TrimSpace(fmt.Sprintf("%s from %s", p.ID, dash(p.Sender)))
			if p.Answer != "" {
				x.Lines = strings.Split(p.Answer, "\n")
			}
		})
	case *record.Observation:
		return one(func(x *Entry) { x.Kind, x.Text, x.Class = KindObservation, p.Text, p.Kind })
	case *record.Control:
		return one(func(x *Entry) {
			x.Kind, x.Class = KindControl, p.Kind
			var args []string
			for _, k := range sortedKeys(p.Args) {
				args = append(args, k+"="+p.Args[k])
			}
			x.Detail = strings.TrimSpace(p.Kind + " " + strings.Join(args, " "))
			if p.Result != "" {
				x.Detail += ": " + oneLine(p.Result)
			}
		})
	case *record.Compaction:
		return one(func(x *Entry) {
			x.Kind = KindCompaction
			if p.Stopped != "" {
				x.Detail = fmt.Sprintf("tier %d stopped: %s", p.Tier, p.Stopped)
				return
			}
			x.Detail = fmt.Sprintf("tier %d: %d → %d tokens (window %d), %d results evicted", p.Tier, p.TokensBefore, p.TokensAfter, p.Window, len(p.Evicted))
			if p.Summarized != nil {
				x.Text = p.Summarized.Summary
				x.Detail += fmt.Sprintf(", %d messages summarized", p.Summarized.Messages)
			}
		})
	case *record.Board:
		return one(func(x *Entry) {
			x.Kind = KindBoard
			d := p.Op + " " + p.ID
			if p.Title != nil {
				d += fmt.Sprintf(" %q", *p.Title)
			}
			if len(p.Deps) > 0 {
				d += " after " + strings.Join(p.Deps, ",")
			}
			if p.Owner != "" {
				d += " owner " + p.Owner
			}
			if p.Note != "" {
				d += ": " + oneLine(p.Note)
			}
			if p.By != "" {
				d += " (by " + p.By + ")"
			}
			x.Detail = d
		})
	case *record.Assignment:
		return one(func(x *Entry) {
			x.Kind = KindAssignment
			if p.State == "" {
				x.Detail = fmt.Sprintf("%s for %s: dispatched as %q", p.Assignment, p.Item, p.Role)
			} else {
				x.Detail = fmt.Sprintf("%s for %s: %s", p.Assignment, p.Item, p.State)
			}
			if p.Reason != "" {
				x.Detail += " (" + oneLine(p.Reason) + ")"
			}
		})
	case *record.Report:
		return one(func(x *Entry) {
			x.Kind, x.Text = KindReport, p.Summary
			x.Detail = fmt.Sprintf("%s for %s", p.Assignment, p.Item)
			if len(p.Artifacts) > 0 {
				x.Detail += ", artifacts " + strings.Join(p.Artifacts, ", ")
			}
		})
	case *record.AgentStarted:
		return one(func(x *Entry) {
			x.Kind = KindAgent
			x.Detail = fmt.Sprintf("%s started: %s for %s", e.Agent, p.Role, p.Parent)
			switch {
			case p.Wave > 0 && p.Claim != "":
				x.Detail += fmt.Sprintf(" (effort wave %d on %s)", p.Wave, p.Claim)
			case p.Claim != "":
				x.Detail += " (claim " + p.Claim + ")"
			}
		})
	case *record.Verdict:
		return one(func(x *Entry) {
			x.Kind, x.Text, x.Detail = KindVerdict, p.Claim, p.Verdict
			if p.ClaimID != "" {
				x.Detail += " (" + p.ClaimID + ")"
			}
			if p.Reason != "" {
				x.Detail += ": " + oneLine(p.Reason)
			}
		})
	case *record.Lease:
		return one(func(x *Entry) {
			x.Kind = KindLease
			x.Detail = fmt.Sprintf("lease %s to %s: %s", p.Action, dash(p.Holder), strings.Join(p.Paths, ", "))
			if p.Reason != "" {
				x.Detail += " (" + p.Reason + ")"
			}
		})
	case *record.Warning:
		return one(func(x *Entry) { x.Kind, x.Class, x.Detail = KindWarning, p.Code, p.Message })
	case *record.PartialResult:
		return one(func(x *Entry) { x.Kind, x.Text, x.Detail = KindPartial, p.Text, p.Source })
	case *record.Delivery:
		return one(func(x *Entry) {
			x.Kind = KindDelivery
			x.Detail = "delivered"
			for _, d := range p.Entries {
				line := fmt.Sprintf("%s %s %d bytes by %s", d.Status, d.Path, d.Bytes, dash(d.Agent))
				if d.Reason != "" {
					line += ": " + d.Reason
				}
				if d.Status != "delivered" {
					x.Detail, x.Error = "NOT all delivered", true
				}
				x.Lines = append(x.Lines, line)
			}
			for _, u := range p.Undeclared {
				x.Lines = append(x.Lines, "undeclared (not delivered) "+u)
			}
			if len(p.Entries) == 0 {
				x.Detail = "nothing declared"
			}
		})
	case *record.Verification:
		return one(func(x *Entry) {
			x.Kind, x.Error = KindVerification, !p.Passed
			what := "check " + p.Check + " " + p.Path
			if p.Check == "" {
				what = fmt.Sprintf("verify[%d] %q (%s)", p.Index, p.Name, p.Kind)
			}
			word := "passed"
			if !p.Passed {
				word = "FAILED"
			}
			x.Detail = fmt.Sprintf("%s %s: %s", word, what, oneLine(p.Detail))
		})
	case *record.Resumed:
		return resumedEntries(p, base)
	case *record.RunFinished:
		return one(func(x *Entry) {
			x.Kind, x.Text, x.Tokens = KindRunFinished, p.Summary, p.Usage.TotalTokens
			x.Error = p.Status != "completed"
			x.Detail = fmt.Sprintf("%s (%s): %d turns, %d tool calls, %d tokens, %s", p.Status, p.Termination, p.Turns, p.ToolCalls, p.Usage.TotalTokens,
				(time.Duration(p.DurationMS) * time.Millisecond).Round(100*time.Millisecond))
			if p.Error != "" {
				x.Lines = append(x.Lines, "error: "+oneLine(p.Error))
			}
			for _, f := range p.Failures {
				x.Lines = append(x.Lines, "FAILED: "+oneLine(f))
			}
			if p.Partial != "" {
				x.Lines = append(x.Lines, "partial result: "+p.Partial)
			}
		})
	}
	if out, ok := moreEntries(p, base); ok {
		return out
	}
	return one(func(x *Entry) { x.Kind, x.Detail = KindEvent, e.Type })
}

func readBlob(dir, ref string) (string, error) {
	b, err := record.ReadBlob(dir, ref)
	return string(b), err
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
