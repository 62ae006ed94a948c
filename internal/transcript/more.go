package transcript

import (
	"fmt"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Entry kinds of the events beyond the agent loop's: the claim ledger,
// adaptive effort, synthesis, review, evidence, worlds, merges, planning
// and an answer taken as finish.
const (
	KindClaim       = "claim"
	KindEffort      = "effort"
	KindSynthesis   = "synthesis"
	KindReview      = "review"
	KindEvidence    = "evidence"
	KindCorpusIndex = "corpus_index"
	KindTextFinish  = "text_finish"
	KindWorld       = "world"
	KindMerge       = "merge"
	KindPlanning    = "planning"
	KindClaimMark   = "claim_mark"
	KindCitations   = "citations"
	KindPrecheck    = "precheck"
	KindMCPServer   = "mcp_server"
	// KindInterrupted is a tool call cut off when the process stopped: the
	// resumed event names it; the agent was told it was interrupted.
	KindInterrupted = "interrupted"
	// KindRunning is a live run's call that has no result yet.
	KindRunning = "running"
)

// labels are kinds in words where the kind's name is not already a word.
var labels = map[string]string{
	KindRunStarted: "started", KindToolCall: "call", KindToolResult: "result", KindModelError: "model error",
	KindUser: "user", KindObservation: "runtime", KindPartial: "partial result", KindRunFinished: "finished",
	KindCorpusIndex: "corpus index", KindTextFinish: "answer taken as finish", KindRetry: "retry",
	KindClaimMark: "claim marked", KindCitations: "cites", KindPrecheck: "checks before finish", KindMCPServer: "MCP server",
}

// Label is a kind in words, as the transcript prints it ("model error",
// "answer taken as finish").
func Label(kind string) string {
	if l, ok := labels[kind]; ok {
		return l
	}
	return strings.ReplaceAll(kind, "_", " ")
}

// moreEntries renders the event types of moreTypes; ok is false for any
// other type.
func moreEntries(payload any, base Entry) (_ []Entry, ok bool) {
	one := func(f func(*Entry)) []Entry { x := base; f(&x); return []Entry{x} }
	switch p := payload.(type) {
	case *record.Claim:
		return one(func(x *Entry) {
			x.Kind, x.Text = KindClaim, p.Text
			x.Detail = strings.TrimSpace(p.ID + " stated by " + dash(p.StatedBy))
			if p.Item != "" {
				x.Detail += " on " + p.Item
			}
			if len(p.Evidence) > 0 {
				x.Detail += ", evidence " + strings.Join(p.Evidence, ", ")
			}
		}), true
	case *record.Effort:
		return one(func(x *Entry) {
			x.Kind = KindEffort
			switch p.Phase {
			case record.EffortWave:
				x.Detail = fmt.Sprintf("wave %d starts on %s", p.Wave, strings.Join(p.Claims, ", "))
			case record.EffortInvestigator:
				x.Detail = fmt.Sprintf("wave %d: investigator %s on %s ended %s", p.Wave, dash(p.Investigator), dash(p.Claim), dash(p.State))
				if p.Framing != "" {
					x.Detail += " (framing: " + oneLine(p.Framing) + ")"
				}
			case record.EffortOutcome:
				var s []string
				for _, k := range sortedKeys(p.Statuses) {
					s = append(s, k+" "+p.Statuses[k])
				}
				x.Detail = fmt.Sprintf("wave %d ended: %s", p.Wave, strings.Join(s, ", "))
			default:
				x.Detail = p.Phase
			}
		}), true
	case *record.Synthesis:
		return one(func(x *Entry) {
			x.Kind = KindSynthesis
			switch p.Phase {
			case record.SynthesisGraph:
				x.Detail = "the claim–evidence graph is built for the writer"
				if len(p.Reports) > 0 {
					x.Detail += " (reports " + strings.Join(p.Reports, ", ") + ")"
				}
			case record.SynthesisRequest:
				x.Detail = fmt.Sprintf("the writer asked for evidence on %s: %s", dash(p.Claim), oneLine(p.Reason))
				if p.Item != "" {
					x.Detail += " (board item " + p.Item + ")"
				}
			case record.SynthesisCheck:
				x.Detail = fmt.Sprintf("the writer's citations checked: %d resolved, %d failed", p.Citations, len(p.Failures))
				x.Error = len(p.Failures) > 0
				x.Lines = p.Failures
			default:
				x.Detail = p.Phase
			}
		}), true
	case *record.Review:
		return one(func(x *Entry) {
			x.Kind, x.Text, x.Error = KindReview, p.Note, p.Decision != record.ReviewApproved
			x.Detail = p.Decision + " by " + dash(p.By)
		}), true
	case *record.Evidence:
		return one(func(x *Entry) {
			x.Kind, x.CallID = KindEvidence, p.CallID
			x.Detail = fmt.Sprintf("%s from %s %s", p.ID, p.Kind, p.Source)
			if p.Span.From > 0 {
				x.Detail += fmt.Sprintf(" lines %d–%d", p.Span.From, p.Span.To)
			}
			if p.Query != "" {
				x.Detail += fmt.Sprintf(" (search %q)", p.Query)
			}
		}), true
	case *record.CorpusIndex:
		return one(func(x *Entry) {
			x.Kind = KindCorpusIndex
			x.Detail = fmt.Sprintf("%s: %d documents, %d passages", dash(p.State), p.Docs, p.Passages)
			if len(p.Skipped) > 0 {
				x.Detail += fmt.Sprintf(", %d files not indexed", len(p.Skipped))
				x.Lines = p.Skipped
			}
		}), true
	case *record.TextFinish:
		return one(func(x *Entry) {
			x.Kind, x.Turn, x.Text = KindTextFinish, p.Turn, p.Summary
			x.Detail = "accepted"
			if !p.Accepted {
				x.Detail, x.Error = "refused: "+oneLine(p.Refused), true
			}
		}), true
	case *record.World:
		return one(func(x *Entry) {
			x.Kind = KindWorld
			x.Detail = fmt.Sprintf("%s (%s, %s)", p.ID, dash(p.Name), dash(p.Family))
			if g := p.Generator; g.Name != "" {
				x.Detail += fmt.Sprintf(", generator %s %s seed %d level %d", g.Name, g.Version, g.Seed, g.Level)
			}
			if p.Sandbox != "" {
				x.Detail += ", workspace " + p.Sandbox
			}
		}), true
	case *record.Merge:
		return one(func(x *Entry) {
			x.Kind = KindMerge
			x.Detail = fmt.Sprintf("%s's worktree into /workspace: %d applied, %d conflicts, %d refused", dash(p.Assignment), len(p.Applied), len(p.Conflicts), len(p.Refused))
			for _, c := range p.Conflicts {
				x.Lines = append(x.Lines, "conflict "+c.Path+": "+oneLine(c.Reason))
			}
			for _, r := range p.Refused {
				x.Lines = append(x.Lines, "refused "+r.Path+": "+oneLine(r.Reason))
			}
			if len(p.Ignored) > 0 {
				x.Lines = append(x.Lines, "left out: "+strings.Join(p.Ignored, ", "))
			}
			if p.Error != "" {
				x.Error = true
				x.Lines = append(x.Lines, "error: "+oneLine(p.Error))
			}
		}), true
	case *record.ClaimMark:
		return one(func(x *Entry) {
			x.Kind, x.Detail, x.Text = KindClaimMark, strings.TrimSpace(p.Claim+" "+strings.ReplaceAll(p.Mark, "_", "-")), p.Reason
		}), true
	case *record.Citations:
		return one(func(x *Entry) {
			x.Kind, x.Detail = KindCitations, dash(p.Path)
			ids := append(append([]string(nil), p.Claims...), p.Evidence...)
			x.Text = "cites " + strings.Join(orNoneText(ids), ", ")
		}), true
	case *record.Precheck:
		return one(func(x *Entry) {
			x.Kind = KindPrecheck
			x.Detail = fmt.Sprintf("%d checks, %d failed", p.Checks, len(p.Failures))
			if p.Trigger != "" {
				x.Detail += " (" + strings.ReplaceAll(p.Trigger, "_", " ") + ")"
			}
			if p.Refused {
				x.Detail += "; finish refused once for repair"
				x.Error = true
			}
			for _, f := range p.Failures {
				x.Lines = append(x.Lines, oneLine(f))
			}
		}), true
	case *record.MCPServer:
		return one(func(x *Entry) {
			x.Kind = KindMCPServer
			x.Detail = strings.TrimSpace(dash(p.Name) + " " + strings.ReplaceAll(p.State, "_", " "))
			where := p.URL
			if where == "" {
				where = strings.TrimSpace(p.Command + " " + strings.Join(p.Args, " "))
			}
			x.Text = strings.TrimSpace(p.Transport + " " + where)
			if p.ServerName != "" {
				x.Text += " (" + strings.TrimSpace(p.ServerName+" "+p.ServerVersion) + ")"
			}
			if len(p.Tools) > 0 {
				x.Lines = append(x.Lines, fmt.Sprintf("%d tools: %s", len(p.Tools), strings.Join(p.Tools, ", ")))
			}
			for _, l := range p.LeftOut {
				x.Lines = append(x.Lines, "left out: "+oneLine(l))
			}
			if p.Error != "" {
				x.Error = true
				x.Lines = append(x.Lines, "error: "+oneLine(p.Error))
			}
		}), true
	case *record.Planning:
		return one(func(x *Entry) { x.Kind, x.Detail = KindPlanning, strings.TrimSpace(p.Mode+" "+p.State) }), true
	}
	return nil, false
}

// resumedEntries are a resumed event's: each call it names as cut off, as
// an interrupted result of its agent, then the note of the resume.
func resumedEntries(p *record.Resumed, base Entry) []Entry {
	var out []Entry
	for _, agent := range mapsKeys(p.InFlight) {
		for _, c := range p.InFlight[agent] {
			name, id, _ := strings.Cut(c, " ")
			x := base
			x.Agent, x.Kind, x.Tool, x.CallID, x.Error = agent, KindInterrupted, name, id, true
			x.Output = "interrupted: the process stopped while this call ran (it may or may not have taken effect); the agent was told so when the run resumed"
			out = append(out, x)
		}
	}
	x := base
	x.Kind = KindResumed
	x.Detail = fmt.Sprintf("after event %d: %s", p.AfterSeq, p.Reason)
	if p.Model != nil {
		x.Detail += " (model " + strings.TrimSpace(p.Model.Provider+" "+p.Model.Name+" "+p.Model.BaseURL) + ")"
	}
	return append(out, x)
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// orNoneText is ids, or "nothing" when there are none.
func orNoneText(ids []string) []string {
	if len(ids) == 0 {
		return []string{"nothing"}
	}
	return ids
}
