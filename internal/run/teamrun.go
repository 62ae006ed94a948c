package run

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/live"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/team"
)

// Modes of a run.
const (
	ModeReact = "react"
	ModeTeam  = "team"
)

func newTeam(ctx context.Context, cfg Config, rt agent.Runtime, kit *toolkit, dir string, ctl *live.Control, instructions string) *team.Team {
	tc := cfg.Team
	var reports, deliverables []string
	if ctl.Current() != nil {
		for _, d := range ctl.Current().Deliverables {
			deliverables = append(deliverables, d.Path)
			if d.IsReport() {
				reports = append(reports, d.Path)
			}
		}
	}
	return team.New(ctx, team.Config{
		Model: cfg.Model, Log: rt.Log, FS: kit.fs, Evidence: kit.ev.Registry(), ProjectInstructions: instructions,
		Tools:        kit.tools, // recall is added by each subagent's own loop
		MoreTools:    kit.hub.Names,
		Release:      func(id, reason string) { kit.plane.Release(id, reason) },
		Isolation:    tc.Isolation,
		WorktreeRoot: filepath.Join(dir, "worktrees"),
		Concurrency:  tc.Concurrency,
		SubBudget:    budgetOf(tc.SubBudget),
		SubTimeout:   durationOf(tc.SubTimeout),
		Retry:        retryOf(cfg.Settings),
		Context:      contextOf(cfg.Context),
		Plan:         tc.Plan,
		OnStep:       rt.OnStep,
		Clock:        cfg.Clock,
		Wake:         ctl.Wake,
		SubBeforeCall: func(ctx context.Context) []llm.Message {
			ctl.Hold(ctx) // a paused run pauses its subagents too
			return nil
		},
		RequireFinish:  cfg.RequireFinish,
		MergeIgnore:    tc.MergeIgnore,
		VerifierTools:  kit.readOnly,
		VerifyMaxTurns: tc.VerifyMaxTurns,
		Effort:         tc.Effort,
		EffortWidth:    tc.EffortWidth,
		EffortWaves:    tc.EffortWaves,
		EffortBudget:   tc.EffortBudget,
		Deliverables:   deliverables,
		Synthesis:      tc.Synthesis == SynthesisOn,
		Reports:        reports,
		Contract:       contractText(ctl.Current()),
	})
}

// both runs two BeforeCall hooks in order.
func both(a, b func(context.Context) []llm.Message) func(context.Context) []llm.Message {
	return func(ctx context.Context) []llm.Message {
		return append(a(ctx), b(ctx)...)
	}
}

func contractText(c *contract.Contract) string {
	if c == nil {
		return ""
	}
	return taskMessage(c)
}

// synthesisFailed fails a completed run whose report's citations did not
// resolve (R-SYNTH-2).
func synthesisFailed(s *Summary, failures []string) {
	if len(failures) == 0 {
		return
	}
	s.Failures = append(s.Failures, failures...)
	if s.Status == StatusCompleted {
		s.Status, s.Termination = StatusFailed, string(agent.GateFailed)
		s.Error = "the final gate failed: " + strings.Join(failures, "; ")
	}
}
