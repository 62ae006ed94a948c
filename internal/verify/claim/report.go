package claim

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Report is how an agent ends with what it found (R-TEAM-2).
type Report = record.ReportBody

// Stated is one claim of a report with the evidence that supports it.
type Stated = record.ReportClaim

// ReportBox keeps the report an assignment ended with.
type ReportBox struct {
	mu  sync.Mutex
	rep *Report
}

// Get is the report, nil before one was made.
func (b *ReportBox) Get() *Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rep
}

type reportTool struct {
	box   *ReportBox
	fs    *workspace.FS       // the subagent's planes, where its artifacts must exist
	check func(*Report) error // claims must cite (cite.go)
}

// NewReportTool is the report tool: it ends an agent with its report once
// every artifact exists on fs and check (the claims' refs) passes.
func NewReportTool(box *ReportBox, fs *workspace.FS, check func(*Report) error) tool.Tool {
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

// Set makes rep the report (one made before a stop, or a tool-free answer
// taken as the report).
func (b *ReportBox) Set(rep *Report) {
	b.mu.Lock()
	b.rep = rep
	b.mu.Unlock()
}
