// Package agent is the ReAct loop: model call → tool calls → observations,
// until the agent calls finish, a budget ends it, or it is cancelled.
//
// Guarantees:
//   - the tool calls of one turn run in parallel (bounded by Config.Parallel,
//     finish or Config.FinishTool last) and their results enter the history in call order;
//   - nothing the model does wrong ends the run: unknown tools, malformed
//     arguments, failing commands, refused writes and tool panics all come back
//     as observations; only budgets, cancellation, finish and an unrecoverable
//     model error end the loop, each with an enumerated Termination;
//   - every model request (as the messages it added), response (with usage),
//     retry, tool call, result and file delta is in the record before the loop
//     moves on, and the record is synced at every step boundary;
//   - runtime observations (nudges, budget notices) are recorded as
//     observation events, never as user messages;
//   - a reply without tool calls is nudged once; the next consecutive one
//     is taken as finish with its text as the summary (subject to the gate,
//     recorded as text_finish) unless Config.RequireFinish is set;
//   - every model call carries the caller (run, agent id, role) on its
//     context, and every reply, the runtime's summary and salvage calls
//     included, is a model_response event with its usage.
package agent

import (
	"context"
	"errors"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Termination is why a run (or one agent's loop) ended (R-LOOP-2).
type Termination string

// The enumerated termination reasons.
const (
	Completed       Termination = "completed"
	BudgetTurns     Termination = "budget_turns"
	BudgetToolCalls Termination = "budget_tool_calls"
	BudgetTokens    Termination = "budget_tokens"
	SoftDeadline    Termination = "soft_deadline"
	HardTimeout     Termination = "hard_timeout"
	Cancelled       Termination = "cancelled"
	ModelError      Termination = "model_error"
	GateFailed      Termination = "gate_failed"
	Crashed         Termination = "crashed"
)

// ErrHardTimeout is the context cause the runtime uses for the hard timeout,
// so the loop can tell it from a user's cancellation.
var ErrHardTimeout = errors.New("agent: hard timeout reached")

// Budget bounds one agent's loop; zero means unlimited.
type Budget struct {
	MaxTurns     int
	MaxToolCalls int
	MaxTokens    int // total tokens (prompt + completion) over all calls
}

// Step is one tool call, for progress display.
type Step struct {
	Agent   string
	Turn    int
	Tool    string
	Args    string // shortened arguments
	IsError bool
	Output  string // first line of the observation
}

// Config is everything one agent needs. Model, Tools and Log are required.
type Config struct {
	ID     string // agent id in the record, e.g. "main"
	Model  llm.Model
	Tools  *tool.Set
	Log    *record.Log
	FS     *workspace.FS // optional: lets file deltas keep their content as blobs
	System string
	Budget Budget
	// Parallel bounds concurrent tool calls within a turn; default 8.
	Parallel int
	Retry    llm.RetryPolicy
	// Context configures compaction; Window 0 disables it.
	Context Context
	// Evicted, if set, stores evicted bodies and the caller has put its
	// Tool (recall) in Tools; if nil the loop adds its own recall tool.
	Evicted *Evicted
	// Deadlines bound the loop in wall-clock time.
	Deadlines Deadlines
	// Gate, if set, decides whether finish is accepted; its error is shown
	// to the agent, which goes on working.
	Gate func(summary string) error
	// Role is the agent's caller role on the wire (llm.CallerSingle when
	// empty); the loop's summary and salvage calls use their own roles.
	Role string
	// FinishTool names the tool that ends the agent ("finish" when empty;
	// a subagent's is "report"), for the nudge after a tool-free reply.
	FinishTool string
	// RequireFinish keeps nudging after tool-free replies; without it the
	// second consecutive tool-free reply is taken as finish with its text
	// as the summary (subject to Gate).
	RequireFinish bool
	// BeforeCall, if set, runs before every model call and returns messages
	// to add to the history first (runtime observations such as subagent
	// reports, user messages). It records its own events, and may block
	// (a paused run) until ctx ends.
	BeforeCall func(ctx context.Context) []llm.Message
	// Restore, if set, continues an agent from a checkpoint instead of
	// starting from its task: the history and counters of a resumed run.
	Restore *Restore
	// Adjust, if set, runs before every model call and may change the
	// budget and the soft deadline (a user's budget or deadline message).
	Adjust func(b *Budget, d *Deadlines)
	// OnStep, if set, is called after each tool call (progress lines).
	OnStep func(Step)
	// MaxContentBlob is the largest changed file whose content is kept as a
	// blob; default 16 MiB.
	MaxContentBlob int64
	// Clock is the agent's time: the record's step durations, the
	// deadlines and their timers, the retry waits; nil is the system clock.
	Clock clock.Clock
}

// Restore is where a resumed agent picks up.
type Restore struct {
	History   []llm.Message
	Turns     int
	ToolCalls int
	Usage     llm.Usage
}

// Outcome is how the loop ended.
type Outcome struct {
	Termination Termination
	Summary     string // the finish summary
	Partial     string // the salvaged partial result at the soft deadline
	Err         error  // the error behind model_error, cancelled, hard_timeout
	Turns       int
	ToolCalls   int
	Usage       llm.Usage
	History     []llm.Message
}

func (c *Config) defaults() {
	if c.ID == "" {
		c.ID = "main"
	}
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	if c.MaxContentBlob <= 0 {
		c.MaxContentBlob = 16 << 20
	}
	c.Clock = clock.Or(c.Clock)
	if c.Role == "" {
		c.Role = llm.CallerSingle
	}
	if c.FinishTool == "" {
		c.FinishTool = "finish"
	}
}
