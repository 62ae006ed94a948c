package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/apodex/apodex/internal/record"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/llm"
)

// Score is one rubric dimension as the judge scored it.
type Score = record.RubricScore

// CallerJudge is the rubric judge's caller role.
const CallerJudge = "judge"

// maxJudgeBytes bounds what the judge reads.
const maxJudgeBytes = 64 << 10

var scoreSpec = llm.ToolSpec{Name: "score", Description: "Give every dimension a score from 0 to 10 with a one-sentence justification.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"scores":{"type":"array","items":{"type":"object","properties":{` +
		`"dimension":{"type":"string"},"score":{"type":"number","minimum":0,"maximum":10},"justification":{"type":"string"}},"required":["dimension","score","justification"]}}},"required":["scores"]}`)}

// rubric has the judge score the deliverables (or the trace) on each
// dimension through the score tool; it passes when every dimension meets
// its threshold. A dimension the judge leaves out scores 0.
func rubric(ctx context.Context, env Env, c contract.Clause, r Result) Result {
	if env.Judge == nil {
		r.Detail = "no judge model: a rubric clause needs the run's model"
		return r
	}
	var b strings.Builder
	b.WriteString("Score the work below on each dimension, 0 to 10, by calling score once.\n\nDimensions:\n")
	for _, d := range c.Dimensions {
		fmt.Fprintf(&b, "- %s: %s (passes at %g)\n", d.Name, d.Description, d.Threshold)
	}
	if c.Sees == contract.SeesTrace {
		b.WriteString("\nThe run's trace (its record):\n" + readClip(filepath.Join(env.Trace, "events.jsonl"), maxJudgeBytes))
	} else {
		for _, p := range env.Deliverables {
			rel := strings.TrimPrefix(p, "/outputs/")
			fmt.Fprintf(&b, "\n### %s\n%s\n", p, readClip(filepath.Join(env.Outputs, filepath.FromSlash(rel)), maxJudgeBytes/max(len(env.Deliverables), 1)))
		}
	}
	req := &llm.Request{Model: c.JudgeModel, Agent: CallerJudge, Tools: []llm.ToolSpec{scoreSpec}, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a strict judge. You score work against a rubric and justify each score in one sentence."},
		{Role: llm.RoleUser, Content: b.String()},
	}}
	resp, err := env.Judge.Generate(llm.WithCaller(ctx, llm.Caller{Agent: CallerJudge, Role: CallerJudge}), req)
	if err != nil {
		r.Detail = "the judge could not answer: " + err.Error()
		return r
	}
	var args struct {
		Scores []Score `json:"scores"`
	}
	found := false
	for _, tc := range resp.Message.ToolCalls {
		if tc.Name == "score" && json.Unmarshal([]byte(tc.Arguments), &args) == nil {
			found = true
		}
	}
	if !found {
		r.Detail = "the judge did not call score"
		return r
	}
	r.Passed = true
	var failed []string
	for _, d := range c.Dimensions {
		s := Score{Dimension: d.Name, Threshold: d.Threshold}
		for _, got := range args.Scores {
			if strings.EqualFold(got.Dimension, d.Name) {
				s.Score, s.Justification = got.Score, got.Justification
			}
		}
		s.Passed = s.Score >= d.Threshold
		if !s.Passed {
			r.Passed = false
			failed = append(failed, fmt.Sprintf("%s %g < %g (%s)", d.Name, s.Score, d.Threshold, s.Justification))
		}
		r.Scores = append(r.Scores, s)
	}
	r.Detail = "every dimension met its threshold"
	if !r.Passed {
		r.Detail = "below threshold: " + strings.Join(failed, "; ")
	}
	return r
}

func readClip(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(cannot read: " + filepath.Base(path) + ")"
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, int64(n)))
	return string(data)
}
