package team

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Report is how a subagent ends its assignment (R-TEAM-2).
type Report = record.ReportBody

// Claim is one statement with the evidence that supports it.
type Claim = record.ReportClaim

// renderReport is a report as the lead (or a dependent subagent) reads it;
// ids are its claims' ledger ids, in order (none before they are recorded).
func renderReport(r *Report, ids []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Summary: %s\n", r.Summary)
	for i, c := range r.Claims {
		if i < len(ids) {
			fmt.Fprintf(&b, "- claim %s: %s", ids[i], c.Text)
		} else {
			fmt.Fprintf(&b, "- claim: %s", c.Text)
		}
		if len(c.Evidence) > 0 {
			fmt.Fprintf(&b, " [evidence: %s]", strings.Join(c.Evidence, ", "))
		}
		b.WriteString("\n")
	}
	if len(r.Artifacts) > 0 {
		fmt.Fprintf(&b, "Artifacts: %s\n", strings.Join(r.Artifacts, ", "))
	}
	for _, q := range r.OpenQuestions {
		fmt.Fprintf(&b, "- open question: %s\n", q)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// reportBox keeps the report an assignment ended with.
type reportBox struct {
	mu  sync.Mutex
	rep *Report
}

func (b *reportBox) get() *Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rep
}

type reportTool struct {
	box   *reportBox
	fs    *workspace.FS       // the subagent's planes, where its artifacts must exist
	check func(*Report) error // claims must cite (cite.go)
}

func newReportTool(box *reportBox, fs *workspace.FS, check func(*Report) error) tool.Tool {
	return reportTool{box, fs, check}
}

func (reportTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name:        "report",
		Description: "End your assignment with what you found: a summary, your claims each with evidence references (files, commands, evidence ids), the artifacts you wrote, and open questions. The lead decides whether the item is resolved.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"summary":{"type":"string","description":"What you did and found."},` +
			`"claims":{"type":"array","description":"Statements you stand behind.","items":{"type":"object","properties":{"text":{"type":"string"},"evidence":{"type":"array","items":{"type":"string"},"description":"Refs: file paths, commands, evidence ids."}},"required":["text"]}},` +
			`"artifacts":{"type":"array","items":{"type":"string"},"description":"Files you wrote, by path (/workspace/x, /outputs/y); each must exist, or the report is refused."},` +
			`"open_questions":{"type":"array","items":{"type":"string"}}` +
			`},"required":["summary"],"additionalProperties":false}`),
	}
}

// missing lists the artifacts that are not files or directories on the
// subagent's planes (or not paths there at all).
func (r reportTool) missing(artifacts []string) []string {
	if r.fs == nil {
		return nil
	}
	var out []string
	for _, a := range artifacts {
		p, err := r.fs.Resolve(strings.TrimSpace(a))
		if err != nil {
			out = append(out, a)
			continue
		}
		if _, err := os.Lstat(p.Host); err != nil {
			out = append(out, p.PlanePath)
		}
	}
	return out
}

func (r reportTool) Call(_ context.Context, args json.RawMessage) tool.Result {
	var rep Report
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return tool.Errorf("report: bad arguments: %v; expected {\"summary\": \"...\", \"claims\": [{\"text\": \"...\", \"evidence\": [\"/workspace/x\"]}], \"artifacts\": [...], \"open_questions\": [...]}", err)
	}
	if strings.TrimSpace(rep.Summary) == "" {
		return tool.Errorf("report: the summary is empty; say what you did and found")
	}
	for i, c := range rep.Claims {
		if strings.TrimSpace(c.Text) == "" {
			return tool.Errorf("report: claim %d has no text", i+1)
		}
	}
	if missing := r.missing(rep.Artifacts); len(missing) > 0 {
		return tool.Errorf("report refused: no such artifact: %s; write it first, or leave it out of artifacts (artifacts are the files you wrote, by path like /workspace/x)", strings.Join(missing, ", "))
	}
	if r.check != nil {
		if err := r.check(&rep); err != nil {
			return tool.Errorf("report: %v", err)
		}
	}
	r.box.mu.Lock()
	r.box.rep = &rep
	r.box.mu.Unlock()
	return tool.Result{Output: "report received; your assignment ends here", Finish: &tool.Finish{Summary: rep.Summary}}
}
