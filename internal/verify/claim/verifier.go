package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/record"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/tool"
)

// Verdicts of the asymmetric verifier (R-VERIFY-1).
const (
	Supported        = "supported"
	Refuted          = "refuted"
	Insufficient     = "insufficient"
	FormatViolation  = "format_violation"
	maxEvidenceBytes = 48 << 10
	// DefaultVerifyMaxTurns is the verifier's model-call budget.
	DefaultVerifyMaxTurns = 6
)

// Verdict is what the verifier says of one claim.
type Verdict = record.Verdict

// Args is one claim to verify: its words, its evidence refs and the
// delivery constraint it must meet.
type Args struct {
	Claim      string   `json:"claim" desc:"A ledger id (K3), or one claim stated exactly."`
	Evidence   []string `json:"evidence,omitempty" desc:"Refs: evidence ids (E3), file paths (/workspace/x, /inputs/z), bash#<call id>; a ledger claim's own are added."`
	Constraint string   `json:"constraint,omitempty" desc:"The delivery constraint it must meet, if any."`
}

// Run runs verifier id on a claim and records its start and its
// verdict; focus, when set, is added to its task (an effort wave's focused
// verification); claimID, when set, is the ledger claim checked;
// maxTokens, when set, bounds its tokens (an effort wave's share).
func (c *Checker) Run(ctx context.Context, id string, a Args, focus, claimID string, start record.AgentStarted, maxTokens int) Verdict {
	start.Role, start.Claim = llm.CallerVerifier, claimID
	c.host.Started(id, start)
	v := c.verify(ctx, id, a, focus, maxTokens)
	v.ClaimID = claimID
	c.host.Verdict(id, &v)
	return v
}

// Union is a's refs, then b's not in a.
func Union(a, b []string) []string {
	out := slices.Clone(a)
	for _, r := range b {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Render is the verdict as the lead reads it.
func Render(v Verdict) string {
	out := fmt.Sprintf("verdict: %s", v.Verdict)
	if v.ClaimID != "" {
		out += " (claim " + v.ClaimID + ")"
	}
	for _, kv := range [][2]string{{"location", v.Location}, {"reason", v.Reason}, {"required repair", v.Repair}} {
		if kv[1] != "" {
			out += "\n" + kv[0] + ": " + kv[1]
		}
	}
	if len(v.Checks) > 0 {
		out += "\nchecks: " + strings.Join(v.Checks, "; ")
	}
	for _, c := range v.Cut {
		out += "\nevidence cut: " + c
	}
	if v.Item != "" && (v.Verdict == Refuted || v.Verdict == FormatViolation) {
		out += fmt.Sprintf("\nthis claim is attached to board item %s: reopen just that item with board_reopen {\"id\": %q} and re-dispatch it with the repair", v.Item, v.Item)
	}
	return out
}

// verify runs the verifier agent: its context is the claim, the evidence
// expanded to its exact text, and the constraint, never the lead's history.
func (c *Checker) verify(ctx context.Context, id string, a Args, focus string, maxTokens int) Verdict {
	v := Verdict{Claim: a.Claim, Verdict: Insufficient, Evidence: a.Evidence}
	ev, cuts := c.packEvidence(a.Evidence, maxEvidenceBytes)
	v.Cut = cuts
	prompt := fmt.Sprintf("Claim:\n%s\n\nEvidence:\n%s", a.Claim, ev)
	if len(cuts) > 0 {
		prompt += "\nNot all evidence fits here; read the rest with your tools:\n- " + strings.Join(cuts, "\n- ") + "\n"
	}
	if a.Constraint != "" {
		prompt += "\nDelivery constraint:\n" + a.Constraint + "\n"
	}
	if focus != "" {
		prompt += "\nFocus:\n" + focus + "\n"
	}
	prompt += "\nEnd with the verdict tool."
	box := &verdictBox{}
	var tools []tool.Tool
	if c.cfg.VerifierTools != nil {
		tools = c.cfg.VerifierTools(id)
	}
	tools = append(tools, verdictTool(box))
	set := tool.NewSet(tools...)
	turns := c.cfg.VerifyMaxTurns
	if turns <= 0 {
		turns = DefaultVerifyMaxTurns
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	fs := c.cfg.FS.View(nil)
	fs.ReadOnly = true
	out := agent.Run(cctx, agent.Config{
		ID: id, Role: llm.CallerVerifier, FinishTool: "verdict",
		Model: purposeModel{c.cfg.Model, llm.PurposeVerify}, Tools: set, Log: c.cfg.Log, FS: fs,
		System: verifierPrompt + "\n" + agent.ToolNotes(set), Budget: agent.Budget{MaxTurns: turns, MaxTokens: maxTokens},
		Retry: c.cfg.Retry, Clock: c.cfg.Clock, BeforeCall: c.cfg.BeforeCall, OnStep: c.cfg.OnStep,
	}, prompt)
	if got := box.get(); got != nil {
		got.Claim, got.Evidence, got.Cut = a.Claim, a.Evidence, cuts
		return *got
	}
	if out.Termination == agent.Completed && out.Summary != "" {
		// A tool-free answer: take it as a verdict if it is one.
		if got, err := parseVerdict(out.Summary); err == nil {
			got.Claim, got.Evidence, got.Cut = a.Claim, a.Evidence, cuts
			return got
		}
		v.Reason = "the verifier's answer was not a verdict: " + ClipBytes(out.Summary, 300)
		return v
	}
	v.Reason = fmt.Sprintf("the verifier ended without a verdict (%s)", out.Termination)
	if out.Err != nil {
		v.Reason += ": " + out.Err.Error()
	}
	return v
}

func parseVerdict(text string) (Verdict, error) {
	text = strings.TrimSpace(text)
	if i, j := strings.Index(text, "{"), strings.LastIndex(text, "}"); i >= 0 && j > i {
		text = text[i : j+1]
	}
	var got Verdict
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		return got, err
	}
	switch got.Verdict {
	case Supported, Refuted, Insufficient, FormatViolation:
		return got, nil
	}
	return got, fmt.Errorf("unknown verdict %q", got.Verdict)
}

// verdictBox keeps the verdict a verifier ended with.
type verdictBox struct {
	mu sync.Mutex
	v  *Verdict
}

func (b *verdictBox) get() *Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.v
}

type verdictArgs struct {
	Verdict  string   `json:"verdict" desc:"One of supported, refuted, insufficient or format_violation."`
	Location string   `json:"location,omitempty" desc:"Where the problem is: file:line or an evidence id (empty if supported)."`
	Repair   string   `json:"repair,omitempty" desc:"What must change for the claim to hold (empty if supported)."`
	Checks   []string `json:"checks" desc:"What you ran or read to decide, one entry each."`
	Reason   string   `json:"reason,omitempty" desc:"One sentence: why."`
}

// verdictTool ends the verifier with its verdict.
func verdictTool(box *verdictBox) tool.Tool {
	return tool.Define("verdict", "End your check with the verdict: supported | refuted | insufficient | format_violation, the location, the required repair and the checks you made.", 0,
		func(_ context.Context, a verdictArgs) tool.Result {
			switch a.Verdict {
			case Supported, Refuted, Insufficient, FormatViolation:
			default:
				return tool.Errorf("verdict %q is not one of supported, refuted, insufficient, format_violation; call verdict again with one of them", a.Verdict)
			}
			box.mu.Lock()
			box.v = &Verdict{Verdict: a.Verdict, Location: a.Location, Repair: a.Repair, Checks: a.Checks, Reason: a.Reason}
			box.mu.Unlock()
			return tool.Result{Output: "verdict recorded", Finish: &tool.Finish{Summary: a.Verdict}}
		})
}

// ClipBytes cuts s to n bytes, saying it was cut.
func ClipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[… cut]"
}

// purposeModel marks every request of a runtime agent (the verifier) with
// its purpose, so a scripted or replaying model knows it.
type purposeModel struct {
	llm.Model
	purpose string
}

func (m purposeModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	r := *req
	r.Purpose = m.purpose
	return m.Model.Generate(ctx, &r)
}
