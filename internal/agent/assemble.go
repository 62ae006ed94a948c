package agent

import (
	"context"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Runtime is what every agent of a run shares: the model, the record, the
// planes, the retry and compaction policies and the callbacks.
type Runtime struct {
	Model         llm.Model
	Log           *record.Log
	FS            *workspace.FS
	Retry         llm.RetryPolicy
	Context       Context
	OnStep        func(Step)
	Clock         clock.Clock // nil: the system clock
	RequireFinish bool
}

// Spec is what is one agent's own: its identity, tools, prompt, budgets and
// hooks.
type Spec struct {
	ID, Role string
	// FinishTool as in Config ("finish" when empty).
	FinishTool string
	Tools      []tool.Tool
	// Recall gives the agent the recall tool for evicted bodies, listed in
	// its tools (and so in its prompt); without it the loop adds its own.
	Recall bool
	// Guard, if set, wraps the whole tool list (recall included).
	Guard func([]tool.Tool) []tool.Tool
	// Prompt builds the system prompt from the final tool set (nil:
	// SystemPrompt).
	Prompt     func(*tool.Set) string
	Budget     Budget
	Deadlines  Deadlines
	Gate       func(summary string) error
	BeforeCall func(ctx context.Context) []llm.Message
	Adjust     func(b *Budget, d *Deadlines)
	Restore    *Restore
}

// Assemble is the one place an agent is put together, for the single run,
// the team's lead and subagents and the tests: the tool set is built once
// (recall added, then guarded) and the prompt is made from that set, so the
// prompt lists exactly the tools the agent has.
func (r Runtime) Assemble(s Spec) Config {
	tools := append([]tool.Tool(nil), s.Tools...)
	var evicted *Evicted
	if s.Recall {
		evicted = NewEvicted()
		tools = append(tools, evicted.Tool())
	}
	if s.Guard != nil {
		tools = s.Guard(tools)
	}
	set := tool.NewSet(tools...)
	prompt := s.Prompt
	if prompt == nil {
		prompt = SystemPrompt
	}
	return Config{
		ID: s.ID, Role: s.Role, FinishTool: s.FinishTool, Model: r.Model, Tools: set, Evicted: evicted,
		Log: r.Log, FS: r.FS, System: prompt(set), Budget: s.Budget, Retry: r.Retry, Context: r.Context,
		Deadlines: s.Deadlines, Gate: s.Gate, BeforeCall: s.BeforeCall, Adjust: s.Adjust, Restore: s.Restore,
		OnStep: r.OnStep, Clock: r.Clock, RequireFinish: r.RequireFinish,
	}
}
