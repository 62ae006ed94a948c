package run

import (
	"context"
	"path/filepath"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/live"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/team"
)

// Modes of a run.
const (
	ModeReact = "react"
	ModeTeam  = "team"
)

// TeamConfig configures --mode team.
type TeamConfig struct {
	// Concurrency bounds running subagents (default 8).
	Concurrency int
	// Isolation is team.PerAgent (default) or team.Shared.
	Isolation string
	// Plan starts the lead in planning mode.
	Plan bool
	// SubBudget and SubTimeout bound each assignment.
	SubBudget  agent.Budget
	SubTimeout time.Duration
	// MergeIgnore are the patterns a per-agent merge leaves out (nil: the
	// defaults, __pycache__, *.pyc, .pytest_cache).
	MergeIgnore []string `json:"merge_ignore,omitempty"`
}

func newTeam(ctx context.Context, cfg Config, rt agent.Runtime, kit *toolkit, dir string, ctl *live.Control) *team.Team {
	tc := cfg.Team
	return team.New(ctx, team.Config{
		Model: cfg.Model, Log: rt.Log, FS: kit.fs, Evidence: kit.ev.registry(),
		Tools:        kit.tools, // recall is added by each subagent's own loop
		Release:      func(id, reason string) { kit.plane.Release(id, reason) },
		Isolation:    tc.Isolation,
		WorktreeRoot: filepath.Join(dir, "worktrees"),
		Concurrency:  tc.Concurrency,
		SubBudget:    tc.SubBudget,
		SubTimeout:   tc.SubTimeout,
		Retry:        cfg.Retry,
		Context:      cfg.Context,
		Plan:         tc.Plan,
		OnStep:       rt.OnStep,
		Now:          cfg.Now,
		Clock:        cfg.Clock,
		Wake:         ctl.Wake,
		SubBeforeCall: func(ctx context.Context) []llm.Message {
			ctl.Hold(ctx) // a paused run pauses its subagents too
			return nil
		},
		RequireFinish: cfg.RequireFinish,
		MergeIgnore:   tc.MergeIgnore,
	})
}

// both runs two BeforeCall hooks in order.
func both(a, b func(context.Context) []llm.Message) func(context.Context) []llm.Message {
	return func(ctx context.Context) []llm.Message {
		return append(a(ctx), b(ctx)...)
	}
}
