// Package synth is synthesis (R-SYNTH-1): once the lead's finish is
// otherwise accepted, the runtime records the claim–evidence graph and a
// writer agent writes the report deliverables from it.
//
// Guarantees:
//   - the writer sees the contract, each report's current content (it
//     revises, never silently starts over), the graph, the exact text of the
//     evidence it cites and the artifacts, never the lead's history;
//   - the writer writes once per run: a later finish keeps its reports;
//   - a writer that lacks evidence for a load-bearing part puts an item on
//     the board and finish is deferred, instead of writing prose;
//   - every citation of the reports is resolved against the graph and Q,
//     and a refuted claim cited as support fails with its file:line;
//   - what each deliverable cites is recorded (citations events) whenever
//     the file changed, so the ledger, a fold of the record, knows it.
package synth

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/verify/claim"
	"github.com/apodex/apodex/internal/workspace"
)

// CallerWriter is the role of the synthesis writer (agents W1, W2, …).
const CallerWriter = "writer"

// WriterPrefix starts the writer's agent id.
const WriterPrefix = "W"

// Config is what synthesis needs of the run.
type Config struct {
	Model llm.Model
	Log   *record.Log
	// State is the run's live state, shared with the checker (nil: the
	// writer follows Log itself).
	State    *claim.State
	FS       *workspace.FS
	Evidence *evidence.Registry
	// Tools builds an agent's standard tools; the writer gets writerTools.
	Tools func(agentID string, fs *workspace.FS) *tool.Set
	// Release ends whatever the agent held (its publishing lease).
	Release    func(agentID, reason string)
	Budget     agent.Budget
	Retry      llm.RetryPolicy
	Clock      clock.Clock
	BeforeCall func(ctx context.Context) []llm.Message
	OnStep     func(agent.Step)
	// Synthesis turns it on; Reports are the report deliverables the
	// writer writes; Contract is the contract as the writer reads it.
	Synthesis bool
	Reports   []string
	Contract  string
	// Deliverables are the paths whose citations are recorded (none:
	// every file under /outputs but scratch).
	Deliverables []string
}

// Host is the team the writer works for: it numbers and records agents and
// owns the board.
type Host interface {
	TakeID(prefix string) string
	Started(id string, a record.AgentStarted)
	// AddItem puts an item on the board on behalf of agent by.
	AddItem(by, title, objective, group string) (string, error)
}

// Writer is one run's synthesis.
type Writer struct {
	cfg  Config
	host Host
	refs *claim.Checker // expands the evidence ids the writer is shown

	mu          sync.Mutex
	synthesized bool              // the writer wrote the reports
	citeHash    map[string]string // deliverable -> hash of its last citations event
}

// New makes a run's synthesis.
func New(cfg Config, host Host, refs *claim.Checker) *Writer {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.State == nil {
		cfg.State = claim.NewState(cfg.Log)
	}
	return &Writer{cfg: cfg, host: host, refs: refs}
}

// Restore takes up what a stopped run's record says synthesis did: whether
// the writer wrote, and the last citations of each deliverable.
func (w *Writer) Restore(events []record.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range events {
		p, _ := record.DecodePayload(e)
		switch p := p.(type) {
		case *record.Synthesis:
			if p.Phase == record.SynthesisCheck {
				w.synthesized = true
			}
		case *record.Citations:
			if w.citeHash == nil {
				w.citeHash = map[string]string{}
			}
			w.citeHash[p.Path] = p.Hash
		}
	}
}

// writerTools are the file tools the writer gets (with claim_outputs for
// the lease of the report paths), search and fetch (which read the corpus
// and add to Q, writing no file) and finish.
var writerTools = []string{"read_file", "write_file", "edit_file", "list_files", "grep", "search", "fetch", "claim_outputs", "finish"}

// citation is a [K3] or [E7] citation in a report.
var citation = regexp.MustCompile(`\[([KE][0-9]+)\]`)

// Synthesize runs synthesis when finish is otherwise accepted: pass 1
// records the claim–evidence graph; pass 2 has the writer write the report
// deliverables from it. A writer's request_evidence defers finish with the
// new board item; otherwise the report's citations are checked and what
// fails is kept for delivery (SynthesisFailures).
func (w *Writer) Synthesize(ctx context.Context) error {
	w.mu.Lock()
	done := w.synthesized
	w.mu.Unlock()
	if !w.cfg.Synthesis || len(w.cfg.Reports) == 0 || done {
		return nil // the writer wrote once: a later finish (a repair) keeps it
	}
	l := w.cfg.State.Ledger()
	graph, _ := json.Marshal(l)
	artifacts := artifactsOf(l)
	existing := w.existingReports()
	hashes := map[string]string{}
	for p, text := range existing {
		sum := sha256.Sum256([]byte(text))
		hashes[p] = "sha256:" + hex.EncodeToString(sum[:])
	}
	w.cfg.Log.Append(record.TypeSynthesis, "runtime", record.Synthesis{Phase: record.SynthesisGraph, Graph: graph, Reports: w.cfg.Reports, Artifacts: artifacts, Existing: hashes})
	if w.cfg.Release != nil {
		w.cfg.Release("lead", "synthesis: the writer writes the reports")
	}
	req := &evidenceRequest{}
	id := w.host.TakeID(WriterPrefix)
	w.host.Started(id, record.AgentStarted{Role: CallerWriter})
	out := w.write(ctx, id, l, artifacts, existing, req)
	if w.cfg.Release != nil {
		w.cfg.Release(id, string(out.Termination))
	}
	if req.item != "" {
		return fmt.Errorf("finish deferred: the writer needs evidence for %s (%s); it is on the board as %s. Dispatch it, resolve it, then finish again", req.claim, req.reason, req.item)
	}
	w.RecordCitations() // what the writer's reports cite bears on the ledger
	n, failures := w.checkCitations(l)
	w.mu.Lock()
	w.synthesized = true
	w.mu.Unlock()
	w.cfg.Log.Append(record.TypeSynthesis, "runtime", record.Synthesis{Phase: record.SynthesisCheck, Reports: w.cfg.Reports, Citations: n, Failures: failures})
	return nil
}

// Failures are the citation failures of the reports the writer
// wrote, as they stand now (the lead may have repaired them since), each
// with its line; delivery fails when there are any.
func (w *Writer) Failures() []string {
	w.mu.Lock()
	done := w.synthesized
	w.mu.Unlock()
	if !done {
		return nil
	}
	_, failures := w.checkCitations(w.cfg.State.Ledger())
	return failures
}

// artifactsOf are the files the reports named, in ledger order.
func artifactsOf(l *claims.Ledger) []string {
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

// write runs the writer agent: its context is the contract, the reports as
// they are, the graph with its evidence text and the artifact list, not
// the lead's history.
func (w *Writer) write(ctx context.Context, id string, l *claims.Ledger, artifacts []string, existing map[string]string, req *evidenceRequest) agent.Outcome {
	var tools []tool.Tool
	if w.cfg.Tools != nil {
		std := w.cfg.Tools(id, w.cfg.FS)
		for _, name := range writerTools {
			if tl, ok := std.Get(name); ok {
				tools = append(tools, tl)
			}
		}
	}
	tools = guardRevisions(tools, w.cfg.FS, keptLines(l, existing))
	tools = append(tools, tool.Define("request_evidence", "Ask the lead for evidence a load-bearing part of the report needs and the graph lacks; it becomes a board item and your work ends. Never fill the gap with plausible prose.", 0,
		func(_ context.Context, a requestArgs) tool.Result {
			if strings.TrimSpace(a.Claim) == "" || strings.TrimSpace(a.Reason) == "" {
				return tool.Errorf("request_evidence needs the claim and the reason")
			}
			item, err := w.host.AddItem(id, "Evidence for "+a.Claim, a.Reason, "synthesis")
			if err != nil {
				return tool.Errorf("%v", err)
			}
			req.claim, req.reason, req.item = a.Claim, a.Reason, item
			w.cfg.Log.Append(record.TypeSynthesis, id, record.Synthesis{Phase: record.SynthesisRequest, Claim: a.Claim, Reason: a.Reason, Item: item})
			return tool.Result{Output: fmt.Sprintf("added %s; control returns to the lead", item), Finish: &tool.Finish{Summary: "requested evidence: " + item}}
		}))
	set := tool.NewSet(tools...)
	return agent.Run(ctx, agent.Config{
		ID: id, Role: CallerWriter, Model: w.cfg.Model, Tools: set, Log: w.cfg.Log, FS: w.cfg.FS,
		System: "You are the writer. You write the report deliverables from the claim–evidence graph only: you state nothing the graph and its evidence do not support. Where a report already exists you revise it: keep what holds, fix what does not, add what is missing; never start over without saying so and why in your finish summary.\n\n" + agent.ToolNotes(set),
		Budget: w.cfg.Budget, Retry: w.cfg.Retry, Clock: w.cfg.Clock, BeforeCall: w.cfg.BeforeCall, OnStep: w.cfg.OnStep,
	}, w.writerTask(l, artifacts, existing, has(set, "fetch"), has(set, "search")))
}

// Bounds of what the writer's task quotes.
const (
	maxReportQuote   = 32 << 10 // of each existing report
	maxEvidenceQuote = 2 << 10  // of each evidence text
	maxEvidenceTotal = 48 << 10 // of all evidence texts
)

// writerTask is the writer's first message: the contract, what each report
// holds now, the graph, the text of the evidence its claims cite, and the
// artifacts.
func (w *Writer) writerTask(l *claims.Ledger, artifacts []string, existing map[string]string, canFetch, canSearch bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Contract:\n%s\n\nWrite: %s\n", w.cfg.Contract, strings.Join(w.cfg.Reports, ", "))
	var cited []string // evidence ids the graph and the reports cite
	kept := keptLines(l, existing)
	for _, rp := range w.cfg.Reports {
		text, ok := existing[rp]
		if !ok {
			fmt.Fprintf(&b, "\n%s does not exist yet: write it.\n", rp)
			continue
		}
		fmt.Fprintf(&b, "\n%s exists (%d bytes, written earlier in this run); revise it, keeping what the graph supports. Its current content:\n<<<\n%s\n>>>\n", rp, len(text), claim.ClipLine(text, maxReportQuote))
		if len(text) > maxReportQuote {
			fmt.Fprintf(&b, "(cut at %d bytes: read the rest with read_file)\n", maxReportQuote)
		}
		if ks := kept[rp]; len(ks) > 0 {
			b.WriteString("These statements cite only verified claims: keep each verbatim with its citations (a write that drops or rewrites one is refused); redo only what is refuted, disputed, unresolved or uncited.\n")
			for _, k := range ks {
				fmt.Fprintf(&b, "- line %d: %s\n", k.line, claim.ClipBytes(k.text, 400))
			}
		}
		for _, m := range citeRef.FindAllStringSubmatch(text, -1) {
			for _, ref := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
				if ref[0] == 'E' && !slices.Contains(cited, ref) {
					cited = append(cited, ref)
				}
			}
		}
	}
	b.WriteString("\nClaim–evidence graph:\n")
	for _, c := range l.Claims {
		weight := ""
		switch {
		case c.Withdrawn != "":
			weight = ", withdrawn: do not cite"
		case c.LoadBearing:
			weight = ", load-bearing"
		case c.Side != "":
			weight = ", side"
		}
		fmt.Fprintf(&b, "- [%s] %s (%s%s; by %s", c.ID, c.Text, c.Status, weight, c.StatedBy)
		if len(c.Evidence) > 0 {
			fmt.Fprintf(&b, "; evidence: %s", strings.Join(c.Evidence, ", "))
		}
		b.WriteString(")\n")
		if c.Withdrawn == "" {
			for _, ref := range c.Evidence {
				if ref = strings.TrimSpace(ref); evidence.IsID(ref) && !slices.Contains(cited, ref) {
					cited = append(cited, ref)
				}
			}
		}
	}
	if len(l.Claims) == 0 {
		b.WriteString("(no claims)\n")
	}
	if len(cited) > 0 && w.cfg.Evidence != nil {
		b.WriteString("\nThe evidence they cite (exact text; quote from it, cite its id):\n")
		total := 0
		for i, ref := range cited {
			text := w.refs.ExpandRef(ref)
			if total+len(text) > maxEvidenceTotal {
				how := "read their sources with read_file"
				if canFetch {
					how = "read them with fetch {\"ref\": \"E…\"}"
				}
				fmt.Fprintf(&b, "(%d more evidence ids not quoted here: %s — %s)\n", len(cited)-i, strings.Join(cited[i:], ", "), how)
				break
			}
			if len(text) > maxEvidenceQuote {
				text = claim.ClipLine(text, maxEvidenceQuote) + "\n(cut: " + map[bool]string{true: "fetch it", false: "read its source"}[canFetch] + " for the rest)"
			}
			total += len(text)
			fmt.Fprintf(&b, "### %s\n%s\n", ref, text)
		}
	}
	fmt.Fprintf(&b, "\nArtifacts: %s\n", strings.Join(claim.OrNone(artifacts, "(none)"), ", "))
	b.WriteString("\nFirst claim_outputs the report paths, then write them (revise an existing one with edit_file or write_file). Cite every statement with its claim [K3] or evidence id [E7]; a quoted span must appear in the evidence it cites. " + moreEvidence(canFetch, canSearch) + "A claim with no evidence is qualified (\"unverified: …\") or dropped; a refuted or withdrawn claim is never cited as support. If a load-bearing part is missing, call request_evidence instead of writing it. End with finish.")
	return b.String()
}

// existingReports is what each report deliverable holds now (absent ones
// are left out).
func (w *Writer) existingReports() map[string]string {
	out := map[string]string{}
	for _, rp := range w.cfg.Reports {
		if data, ok := readPlane(w.cfg.FS, rp); ok {
			out[rp] = string(data)
		}
	}
	return out
}

// checkCitations resolves every citation of the reports against the graph
// and Q; a refuted claim cited fails with its line.
func (w *Writer) checkCitations(l *claims.Ledger) (int, []string) {
	n := 0
	var failures []string
	for _, rp := range w.cfg.Reports {
		p, err := w.cfg.FS.Resolve(rp)
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
					if w.cfg.Evidence == nil {
						failures = append(failures, fmt.Sprintf("synthesis: %s cites %s, but the run holds no evidence ids: %s", where, id, claim.ClipBytes(sc.Text(), 200)))
					} else if _, ok := w.cfg.Evidence.Get(id); !ok {
						failures = append(failures, fmt.Sprintf("synthesis: %s cites %s, which is not in the graph: %s", where, id, claim.ClipBytes(sc.Text(), 200)))
					}
					continue
				}
				c, ok := l.Get(id)
				switch {
				case !ok:
					failures = append(failures, fmt.Sprintf("synthesis: %s cites %s, which is not in the graph: %s", where, id, claim.ClipBytes(sc.Text(), 200)))
				case c.Status == claims.Refuted:
					failures = append(failures, fmt.Sprintf("synthesis: %s cites refuted claim %s as support: %s", where, id, claim.ClipBytes(sc.Text(), 200)))
				}
			}
		}
		f.Close()
	}
	return n, failures
}

// moreEvidence tells the writer how it can find evidence beyond the graph,
// naming only the tools it has.
func moreEvidence(canFetch, canSearch bool) string {
	switch {
	case canSearch && canFetch:
		return "search and fetch find more evidence (cite the ids they return). "
	case canFetch:
		return "fetch reads more evidence (cite the ids it returns). "
	}
	return "read_file and grep read the inputs (cite the evidence ids they show). "
}

func has(set *tool.Set, name string) bool { _, ok := set.Get(name); return ok }
