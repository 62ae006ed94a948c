package team

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

type verifyArgs struct {
	Claim      string   `json:"claim" desc:"A ledger id (K3), or one claim stated exactly."`
	Evidence   []string `json:"evidence,omitempty" desc:"Refs: evidence ids (E3), file paths (/workspace/x, /inputs/z), bash#<call id>; a ledger claim's own are added."`
	Constraint string   `json:"constraint,omitempty" desc:"The delivery constraint it must meet, if any."`
}

// verifyTool sends one claim, its evidence and the applicable constraint —
// not the task — to a verifier agent whose only job is to attack it. A
// claim of the ledger (by id, else by its words) gets the verdict: a
// supported one settles it.
func (t *Team) verifyTool() tool.Tool {
	return tool.Define("verify", "Have an independent verifier attack ONE claim: give its ledger id (K3), whose evidence comes along and whose ledger entry the verdict updates (supported settles it), or its words with evidence refs. Returns supported, refuted, insufficient or format_violation, with where, the repair and what of the evidence was cut.", 0,
		func(ctx context.Context, a verifyArgs) tool.Result {
			a.Claim = strings.TrimSpace(a.Claim)
			if a.Claim == "" {
				return tool.Errorf("verify needs one claim: a ledger id (K3) or the claim's words, and evidence refs for a claim that is not in the ledger")
			}
			t.mu.Lock()
			k, found, err := t.findClaim(a.Claim)
			t.mu.Unlock()
			if err != nil {
				return tool.Errorf("%v", err)
			}
			if !found && len(a.Evidence) == 0 {
				return tool.Errorf("%q is no claim of the ledger, so verify needs at least one evidence ref for it; to verify a reported claim, name it by its id (K1, K2, … shown with each report and in board_view)", clipBytes(a.Claim, 120))
			}
			if err := t.checkRefs(t.cfg.FS, "verify", a.Evidence); err != nil {
				return tool.Errorf("%v", err)
			}
			claimID := ""
			if found {
				a.Claim, claimID = k.Text, k.ID
				a.Evidence = union(k.Evidence, a.Evidence)
			}
			callID := tool.CallID(ctx)
			t.mu.Lock()
			id := t.verifierID(callID)
			t.mu.Unlock()
			v := t.runVerifier(ctx, id, a, "", claimID, record.AgentStarted{CallID: callID}, 0)
			out := renderVerdict(v)
			if claimID == "" {
				out += "\nledger: these words match no reported claim, so this verdict settles nothing; verify a reported claim by its id (K1, K2, …) to settle it"
			} else if c, ok := t.ledger().Get(claimID); ok {
				out += "\nledger: " + claimLine(c)
			}
			return tool.Result{Output: out}
		})
}

// runVerifier runs verifier id on a claim and records its start and its
// verdict; focus, when set, is added to its task (an effort wave's focused
// verification); claimID, when set, is the ledger claim checked;
// maxTokens, when set, bounds its tokens (an effort wave's share).
func (t *Team) runVerifier(ctx context.Context, id string, a verifyArgs, focus, claimID string, start record.AgentStarted, maxTokens int) Verdict {
	start.Role, start.Claim = llm.CallerVerifier, claimID
	t.mu.Lock()
	t.started(id, start)
	t.mu.Unlock()
	v := t.verify(ctx, id, a, focus, maxTokens)
	t.mu.Lock()
	v.ClaimID, v.Item = claimID, t.itemOf(claimID)
	t.verified++
	t.record(record.TypeVerdict, id, v)
	t.mu.Unlock()
	return v
}

// union is a's refs, then b's not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, r := range b {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// render is the verdict as the lead reads it.
func renderVerdict(v Verdict) string {
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
func (t *Team) verify(ctx context.Context, id string, a verifyArgs, focus string, maxTokens int) Verdict {
	v := Verdict{Claim: a.Claim, Verdict: Insufficient, Evidence: a.Evidence}
	ev, cuts := t.packEvidence(a.Evidence, maxEvidenceBytes)
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
	if t.cfg.VerifierTools != nil {
		tools = t.cfg.VerifierTools(id)
	}
	tools = append(tools, verdictTool(box))
	set := tool.NewSet(tools...)
	turns := t.cfg.VerifyMaxTurns
	if turns <= 0 {
		turns = DefaultVerifyMaxTurns
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	fs := t.cfg.FS.View(nil)
	fs.ReadOnly = true
	out := agent.Run(cctx, agent.Config{
		ID: id, Role: llm.CallerVerifier, FinishTool: "verdict",
		Model: purposeModel{t.cfg.Model, llm.PurposeVerify}, Tools: set, Log: t.cfg.Log, FS: fs,
		System: verifierPrompt + "\n" + agent.ToolNotes(set), Budget: agent.Budget{MaxTurns: turns, MaxTokens: maxTokens},
		Retry: t.cfg.Retry, Clock: t.cfg.Clock, BeforeCall: t.cfg.SubBeforeCall, OnStep: t.cfg.OnStep,
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
		v.Reason = "the verifier's answer was not a verdict: " + clipBytes(out.Summary, 300)
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

func clipBytes(s string, n int) string {
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
