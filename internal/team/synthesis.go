package team

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/board"
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// CallerWriter is the role of the synthesis writer; WriterID its agent id.
const (
	CallerWriter = "writer"
	WriterID     = "writer"
)

// writerTools are the file tools the writer gets (with claim_outputs for
// the lease of the report paths) and finish.
var writerTools = []string{"read_file", "write_file", "edit_file", "list_files", "grep", "claim_outputs", "finish"}

// citation is a [K3] or [E7] citation in a report.
var citation = regexp.MustCompile(`\[([KE][0-9]+)\]`)

// maybeSynthesis runs synthesis when finish is otherwise accepted: pass 1
// records the claim–evidence graph; pass 2 has the writer write the report
// deliverables from it. A writer's request_evidence defers finish with the
// new board item; otherwise the report's citations are checked and what
// fails is kept for delivery (SynthesisFailures).
func (t *Team) maybeSynthesis() error {
	if !t.cfg.Synthesis || len(t.cfg.Reports) == 0 {
		return nil
	}
	l := t.ledger()
	graph, _ := json.Marshal(l)
	artifacts := t.artifacts(l)
	t.record(record.TypeSynthesis, "runtime", record.Synthesis{Phase: record.SynthesisGraph, Graph: graph, Reports: t.cfg.Reports, Artifacts: artifacts})
	if t.cfg.Release != nil {
		t.cfg.Release("lead", "synthesis: the writer writes the reports")
	}
	req := &evidenceRequest{}
	out := t.write(t.ctx, l, artifacts, req)
	if t.cfg.Release != nil {
		t.cfg.Release(WriterID, string(out.Termination))
	}
	if req.item != "" {
		return fmt.Errorf("finish deferred: the writer needs evidence for %s (%s); it is on the board as %s. Dispatch it, resolve it, then finish again", req.claim, req.reason, req.item)
	}
	n, failures := t.checkCitations(l)
	t.mu.Lock()
	t.synthFailures = failures
	t.mu.Unlock()
	t.record(record.TypeSynthesis, "runtime", record.Synthesis{Phase: record.SynthesisCheck, Reports: t.cfg.Reports, Citations: n, Failures: failures})
	return nil
}

// SynthesisFailures are the writer's citation failures, each with its line;
// delivery fails when there are any.
func (t *Team) SynthesisFailures() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.synthFailures)
}

// artifacts are the files the reports named, in ledger order.
func (t *Team) artifacts(l *claims.Ledger) []string {
	var out []string
	for _, c := range l.Claims {
		for _, a := range c.Artifacts {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

type evidenceRequest struct{ claim, reason, item string }

type requestArgs struct {
	Claim  string `json:"claim" desc:"The claim (K id or text) the report needs but the graph does not support."`
	Reason string `json:"reason" desc:"What evidence is missing."`
}

// write runs the writer agent: its context is the contract, the graph and
// the artifact list, not the lead's history.
func (t *Team) write(ctx context.Context, l *claims.Ledger, artifacts []string, req *evidenceRequest) agent.Outcome {
	var tools []tool.Tool
	if t.cfg.Tools != nil {
		std := t.cfg.Tools(WriterID, t.cfg.FS)
		for _, name := range writerTools {
			if tl, ok := std.Get(name); ok {
				tools = append(tools, tl)
			}
		}
	}
	tools = append(tools, tool.Define("request_evidence", "Ask the lead for evidence a load-bearing part of the report needs and the graph lacks; it becomes a board item and your work ends. Never fill the gap with plausible prose.", 0,
		func(_ context.Context, a requestArgs) tool.Result {
			if strings.TrimSpace(a.Claim) == "" || strings.TrimSpace(a.Reason) == "" {
				return tool.Errorf("request_evidence needs the claim and the reason")
			}
			t.mu.Lock()
			e, err := t.mutate(WriterID, func(b *board.Board) (board.Event, error) {
				return b.Add(WriterID, "Evidence for "+a.Claim, a.Reason, nil, "synthesis")
			})
			t.mu.Unlock()
			if err != nil {
				return tool.Errorf("%v", err)
			}
			req.claim, req.reason, req.item = a.Claim, a.Reason, e.ID
			t.record(record.TypeSynthesis, WriterID, record.Synthesis{Phase: record.SynthesisRequest, Claim: a.Claim, Reason: a.Reason, Item: e.ID})
			return tool.Result{Output: fmt.Sprintf("added %s; control returns to the lead", e.ID), Finish: &tool.Finish{Summary: "requested evidence: " + e.ID}}
		}))
	set := tool.NewSet(tools...)
	var b strings.Builder
	fmt.Fprintf(&b, "Contract:\n%s\n\nWrite: %s\n\nClaim–evidence graph:\n", t.cfg.Contract, strings.Join(t.cfg.Reports, ", "))
	for _, c := range l.Claims {
		lb := ""
		if c.LoadBearing {
			lb = ", load-bearing"
		}
		fmt.Fprintf(&b, "- [%s] %s (%s%s; by %s", c.ID, c.Text, c.Status, lb, c.StatedBy)
		if len(c.Evidence) > 0 {
			fmt.Fprintf(&b, "; evidence: %s", strings.Join(c.Evidence, ", "))
		}
		b.WriteString(")\n")
	}
	if len(l.Claims) == 0 {
		b.WriteString("(no claims)\n")
	}
	fmt.Fprintf(&b, "\nArtifacts: %s\n", strings.Join(append(artifacts, "(none)")[:max(len(artifacts), 1)], ", "))
	b.WriteString("\nFirst claim_outputs the report paths, then write them. Cite every statement with its claim [K3] or evidence id [E7]. A claim with no evidence is qualified (\"unverified: …\") or dropped; a refuted claim is never cited as support. If a load-bearing part is missing, call request_evidence instead of writing it. End with finish.")
	return agent.Run(ctx, agent.Config{
		ID: WriterID, Role: CallerWriter, Model: t.cfg.Model, Tools: set, Log: t.cfg.Log, FS: t.cfg.FS,
		System: "You are the writer. You write the report deliverables from the claim–evidence graph only: you state nothing the graph does not support.\n\n" + agent.ToolNotes(set),
		Budget: t.cfg.SubBudget, Retry: t.cfg.Retry, Clock: t.cfg.Clock, BeforeCall: t.cfg.SubBeforeCall, OnStep: t.cfg.OnStep,
	}, b.String())
}

// checkCitations resolves every citation of the reports against the graph
// and Q; a refuted claim cited fails with its line.
func (t *Team) checkCitations(l *claims.Ledger) (int, []string) {
	n := 0
	var failures []string
	for _, rp := range t.cfg.Reports {
		p, err := t.cfg.FS.Resolve(rp)
		if err != nil {
			continue
		}
		f, err := os.Open(p.Host)
		if err != nil {
			failures = append(failures, fmt.Sprintf("synthesis: %s was not written", rp))
			continue
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			for _, m := range citation.FindAllStringSubmatch(sc.Text(), -1) {
				n++
				id := m[1]
				where := fmt.Sprintf("%s:%d", rp, line)
				if id[0] == 'E' {
					if t.cfg.Evidence == nil {
						failures = append(failures, fmt.Sprintf("synthesis: %s cites %s, but the run holds no evidence ids: %s", where, id, clipBytes(sc.Text(), 200)))
					} else if _, ok := t.cfg.Evidence.Get(id); !ok {
						failures = append(failures, fmt.Sprintf("synthesis: %s cites %s, which is not in the graph: %s", where, id, clipBytes(sc.Text(), 200)))
					}
					continue
				}
				c, ok := l.Get(id)
				switch {
				case !ok:
					failures = append(failures, fmt.Sprintf("synthesis: %s cites %s, which is not in the graph: %s", where, id, clipBytes(sc.Text(), 200)))
				case c.Status == claims.Refuted:
					failures = append(failures, fmt.Sprintf("synthesis: %s cites refuted claim %s as support: %s", where, id, clipBytes(sc.Text(), 200)))
				}
			}
		}
		f.Close()
	}
	return n, failures
}
