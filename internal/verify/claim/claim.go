// Package claim checks what agents claim (R-VERIFY-1, R-EFFORT-1): the
// refs a claim may cite, the report tool by which an agent states claims
// with evidence, the asymmetric verifier that attacks one claim, and
// adaptive effort, which spends further agents only on load-bearing claims
// that are not settled.
//
// Guarantees:
//   - a ref is an evidence id of Q, an existing file or a bash call on the
//     record; anything else is refused with what a ref may be;
//   - the verifier sees one claim, its evidence expanded to exact text and
//     the constraint, never the task or the lead's history; what of the
//     evidence did not fit is said, never dropped silently;
//   - every verifier and investigator is started, and every verdict and
//     report recorded, through the Host (the team), so ids and the record's
//     order are the team's;
//   - an effort wave targets only load-bearing, unsettled, not withdrawn
//     claims, gives each claim framings none of its earlier waves used,
//     runs its agents up to the run's concurrency and stays within effort's
//     token budget;
//   - what the checks read of the run (the claim ledger, the tokens spent,
//     the bash calls a ref may name) comes from State, the run's state
//     folded in memory from its log as it grows (runstate.Live), never
//     from re-reading events.jsonl; only a bash ref's output is read from
//     the record, for that call.
package claim

import (
	"context"
	_ "embed"
	"sync"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

//go:embed verifier.md
var verifierPrompt string

// Prefixes of the ids of the agents this package starts: verifiers V1,
// V2, …, investigators I1, ….
const (
	VerifierPrefix     = "V"
	InvestigatorPrefix = "I"
)

// Config is what the verifier and effort need of the run.
type Config struct {
	Model llm.Model
	Log   *record.Log
	// State is the run's live state (nil: the checker follows Log itself).
	State    *State
	FS       *workspace.FS
	Evidence *evidence.Registry
	// VerifierTools, if set, builds the verifier's and investigators'
	// read-only tools; the verdict (or report) tool is added to them.
	VerifierTools  func(agentID string) []tool.Tool
	VerifyMaxTurns int
	// SubBudget bounds each investigator.
	SubBudget  agent.Budget
	Retry      llm.RetryPolicy
	Clock      clock.Clock
	BeforeCall func(ctx context.Context) []llm.Message
	OnStep     func(agent.Step)
	// Concurrency bounds the agents of an effort wave running at once.
	Concurrency int
	// Effort is EffortAdaptive or EffortOff; see team.Config.
	Effort                   string
	EffortWidth, EffortWaves int
	EffortBudget             int
}

// Host is the team that runs the checks: it numbers and records the agents
// and what they return, under its own lock.
type Host interface {
	// TakeID is the next id of an agent of prefix.
	TakeID(prefix string) string
	// Started records that agent id started.
	Started(id string, a record.AgentStarted)
	// Verdict records verifier id's verdict (the host adds the claim's item).
	Verdict(id string, v *Verdict)
	// Reported records investigator id's report and its claims.
	Reported(id string, rep *Report)
}

// Checker verifies claims and runs effort waves for one run.
type Checker struct {
	cfg  Config
	host Host

	mu    sync.Mutex
	waves int // effort waves run
}

// New makes a checker.
func New(cfg Config, host Host) *Checker {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.State == nil {
		cfg.State = NewState(cfg.Log)
	}
	return &Checker{cfg: cfg, host: host}
}

// Restored sets the number of effort waves a stopped run had run.
func (c *Checker) Restored(waves int) {
	c.mu.Lock()
	c.waves = max(c.waves, waves)
	c.mu.Unlock()
}
