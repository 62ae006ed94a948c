package eval

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/apodex/apodex/internal/record"
)

// Score is one rollout's score vector (R-EVAL-1). A nil share means the
// rollout had nothing to measure it on (no deliverables, no tool errors, no
// scheduled interventions) and is left out of means.
type Score struct {
	Correct      float64  `json:"correct"`      // 1 when every check and verifier clause passed
	Completeness *float64 `json:"completeness"` // share of declared deliverables delivered
	Provenance   *float64 `json:"provenance"`   // share of artifacts and citations that resolve
	Recovery     *float64 `json:"recovery"`     // share of tool errors followed by a changed, successful call
	Intervention *float64 `json:"intervention"` // share of scheduled interventions reflected
	WallS        float64  `json:"wall_s"`
	Tokens       int      `json:"tokens"`
	ToolCalls    int      `json:"tool_calls"`
}

// citation finds what a delivered text cites: corpus documents and plane
// paths.
var citation = regexp.MustCompile(`(?:/inputs/|/workspace/)[A-Za-z0-9._/-]+|\bdoc-[0-9]+\.md\b`)

// scoreRun scores the finished run in dir from its record alone. It is the
// one place scores come from, so that it can move onto the shared run-state
// projection without changing anything else. reflected[i] says whether the
// i-th scheduled intervention was reflected (judged by the caller on the
// terminal state); nil when none was scheduled.
func scoreRun(dir string, reflected []bool) (Score, error) {
	c, err := record.Read(dir)
	if err != nil {
		return Score{}, err
	}
	var (
		s         Score
		started   record.RunStarted
		declared  []string
		delivered = map[string]bool{}
		failed    bool
		verified  bool
		produced  = map[string]bool{} // plane paths a tool call wrote
		texts     = map[string]string{}
		calls     []record.ToolCall
		results   = map[string]record.ToolResult{}
		finished  bool
	)
	for _, e := range c.Events {
		v, err := record.DecodePayload(e)
		if err != nil {
			continue // a type this version does not know, or a payload that does not decode
		}
		switch p := v.(type) {
		case *record.RunStarted:
			started = *p
		case *record.Contract:
			var ce struct {
				Deliverables []struct {
					Path string `json:"path"`
				} `json:"deliverables"`
			}
			json.Unmarshal(p.Contract, &ce)
			declared = declared[:0]
			for _, d := range ce.Deliverables {
				declared = append(declared, d.Path)
			}
		case *record.ToolCall:
			tc := *p
			tc.CallID = e.Agent + "/" + tc.CallID
			calls = append(calls, tc)
		case *record.ToolResult:
			results[e.Agent+"/"+p.CallID] = *p
		case *record.FileDelta:
			if p.After != "" {
				produced[p.Path] = true
				texts[p.Path] = p.Content
				if p.Content == "" && p.ContentRef != "" {
					if b, err := record.ReadBlob(dir, p.ContentRef); err == nil && len(b) <= 1<<20 {
						texts[p.Path] = string(b)
					}
				}
			}
		case *record.Delivery:
			for _, en := range p.Entries {
				if en.Status == "delivered" {
					delivered[en.Path] = true
				}
			}
		case *record.Verification:
			verified = true
			failed = failed || !p.Passed
		case *record.RunFinished:
			finished = true
			s.Tokens, s.ToolCalls = p.Usage.TotalTokens, p.ToolCalls
			s.WallS = float64(p.DurationMS) / 1000
			failed = failed || p.Status != "completed"
		}
	}
	if finished && verified && !failed {
		s.Correct = 1
	}
	if len(declared) > 0 {
		n := 0
		for _, p := range declared {
			if delivered[p] {
				n++
			}
		}
		s.Completeness = share(n, len(declared))
	}
	s.Provenance = provenance(delivered, produced, texts, calls, results, started.Inputs)
	s.Recovery = recovery(calls, results)
	if len(reflected) > 0 {
		n := 0
		for _, r := range reflected {
			if r {
				n++
			}
		}
		s.Intervention = share(n, len(reflected))
	}
	return s, nil
}

// provenance: every delivered artifact must have been written by a
// recorded tool call, and every citation in a delivered text (a corpus
// document, a plane path) must name an input, or something a recorded call
// read or was shown in its result: evidence the agent actually saw.
func provenance(delivered, produced map[string]bool, texts map[string]string, calls []record.ToolCall, results map[string]record.ToolResult, inputs []record.FileEntry) *float64 {
	total, ok := 0, 0
	for p := range delivered {
		total++
		if produced[p] {
			ok++
		}
		for _, cite := range uniq(citation.FindAllString(texts[p], -1)) {
			total++
			if resolves(cite, calls, results, inputs) {
				ok++
			}
		}
	}
	if total == 0 {
		return nil
	}
	return share(ok, total)
}

func resolves(cite string, calls []record.ToolCall, results map[string]record.ToolResult, inputs []record.FileEntry) bool {
	for _, c := range calls {
		r := results[c.CallID]
		if r.IsError {
			continue
		}
		// A write names what it writes, not what it read: only reads count
		// by their arguments; any call counts by what it showed.
		read := c.Name == "read_file" || c.Name == "grep" || c.Name == "list_files"
		if (read && strings.Contains(c.Arguments, cite)) || strings.Contains(r.Output, cite) {
			return true
		}
	}
	for _, in := range inputs {
		if in.Path == cite {
			return true
		}
	}
	return false
}

// recovery: of the calls that failed, the share whose agent's next call
// was a different call (name or arguments) that succeeded.
func recovery(calls []record.ToolCall, results map[string]record.ToolResult) *float64 {
	errs, recovered := 0, 0
	for i, c := range calls {
		if r, ok := results[c.CallID]; !ok || !r.IsError {
			continue
		}
		errs++
		agent := c.CallID[:strings.Index(c.CallID, "/")]
		for _, next := range calls[i+1:] {
			if !strings.HasPrefix(next.CallID, agent+"/") {
				continue
			}
			if r, ok := results[next.CallID]; ok && !r.IsError && (next.Name != c.Name || next.Arguments != c.Arguments) {
				recovered++
			}
			break
		}
	}
	if errs == 0 {
		return nil
	}
	return share(recovered, errs)
}

func share(n, d int) *float64 {
	v := float64(n) / float64(d)
	return &v
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
