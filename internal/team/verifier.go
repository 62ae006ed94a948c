package team

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// Verdicts of the asymmetric verifier (R-VERIFY-1).
const (
	Supported        = "supported"
	Refuted          = "refuted"
	Insufficient     = "insufficient"
	FormatViolation  = "format_violation"
	maxEvidenceBytes = 48 << 10
)

// Verdict is what the verifier says of one claim.
type Verdict = record.Verdict

type verifyArgs struct {
	Claim      string   `json:"claim" desc:"One claim to check, stated exactly."`
	Evidence   []string `json:"evidence" desc:"Refs that support it: evidence ids (E3), file paths (/workspace/x, /outputs/y, /inputs/z), or bash#<call id>."`
	Constraint string   `json:"constraint,omitempty" desc:"The delivery constraint it must meet, if any."`
}

// verifyTool sends one claim, its evidence and the applicable constraint —
// not the task — to a verifier whose only job is to attack it.
func (t *Team) verifyTool() tool.Tool {
	return tool.Define("verify", "Have an independent verifier attack ONE claim with its evidence (and the delivery constraint, if any). Returns a verdict: supported, refuted, insufficient or format_violation, with where and what to repair.", 0,
		func(ctx context.Context, a verifyArgs) tool.Result {
			if strings.TrimSpace(a.Claim) == "" || len(a.Evidence) == 0 {
				return tool.Errorf("verify needs one claim and at least one evidence ref")
			}
			if err := t.checkRefs(t.cfg.FS, "verify", a.Evidence); err != nil {
				return tool.Errorf("%v", err)
			}
			v := t.verify(ctx, a)
			t.mu.Lock()
			t.verified++
			t.record(record.TypeVerdict, VerifierID, v)
			t.mu.Unlock()
			out := fmt.Sprintf("verdict: %s", v.Verdict)
			if v.Location != "" {
				out += "\nlocation: " + v.Location
			}
			if v.Reason != "" {
				out += "\nreason: " + v.Reason
			}
			if v.Repair != "" {
				out += "\nrequired repair: " + v.Repair
			}
			return tool.Result{Output: out}
		})
}

func (t *Team) verify(ctx context.Context, a verifyArgs) Verdict {
	v := Verdict{Claim: a.Claim, Verdict: Insufficient}
	var ev strings.Builder
	for _, ref := range a.Evidence {
		fmt.Fprintf(&ev, "### %s\n%s\n\n", ref, t.expandRef(ref))
	}
	prompt := fmt.Sprintf("Claim:\n%s\n\nEvidence:\n%s", a.Claim, clipBytes(ev.String(), maxEvidenceBytes))
	if a.Constraint != "" {
		prompt += "\nDelivery constraint:\n" + a.Constraint
	}
	cctx, cancel := context.WithTimeout(llm.WithCaller(ctx, llm.Caller{Agent: VerifierID, Role: llm.CallerVerifier}), 2*time.Minute)
	defer cancel()
	start := t.cfg.Now()
	resp, err := llm.WithRetry(t.cfg.Model, t.cfg.Retry).Generate(cctx, &llm.Request{Purpose: llm.PurposeVerify, Agent: VerifierID, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: verifierPrompt},
		{Role: llm.RoleUser, Content: prompt},
	}})
	if err != nil {
		v.Reason = "the verifier could not answer: " + err.Error()
		return v
	}
	t.recordReply(resp, start)
	text := strings.TrimSpace(resp.Message.Content)
	if i, j := strings.Index(text, "{"), strings.LastIndex(text, "}"); i >= 0 && j > i {
		text = text[i : j+1]
	}
	var got Verdict
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		v.Reason = "the verifier's answer was not a verdict: " + clipBytes(resp.Message.Content, 300)
		return v
	}
	switch got.Verdict {
	case Supported, Refuted, Insufficient, FormatViolation:
		got.Claim = a.Claim
		return got
	}
	v.Reason = fmt.Sprintf("the verifier gave an unknown verdict %q", got.Verdict)
	return v
}

// VerifierID is the agent id of the verifier's calls and verdicts.
const VerifierID = "verifier"

// recordReply records the verifier's reply as a model_response of the
// verifier, so its usage is in the run's totals.
func (t *Team) recordReply(resp *llm.Response, start time.Time) {
	m := resp.Message
	m.Role, m.ToolCalls = llm.RoleAssistant, nil
	raw, err := json.Marshal(m)
	if err != nil {
		return
	}
	t.record(record.TypeModelResponse, VerifierID, record.ModelResponse{Purpose: record.PurposeVerify, Message: raw, Usage: resp.Usage,
		FinishReason: resp.FinishReason, Model: resp.Model, DurationMS: t.cfg.Now().Sub(start).Milliseconds()})
}

// evidenceText reads a file ref from the shared planes, or takes the ref as
// quoted text.
func (t *Team) evidenceText(ref string) string {
	if !strings.HasPrefix(ref, "/") {
		return ref
	}
	p, err := t.cfg.FS.Resolve(ref)
	if err != nil {
		return "(cannot read: " + err.Error() + ")"
	}
	f, err := t.cfg.FS.Open(p)
	if err != nil {
		return "(cannot read: " + err.Error() + ")"
	}
	defer f.Close()
	buf := make([]byte, maxEvidenceBytes)
	n, _ := f.Read(buf)
	return string(buf[:n])
}

func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[… cut]"
}
