package record

import (
	"fmt"
	"time"
)

// RunSettings is every setting a run has (run_started's "settings"), so
// that a resume and a replay run it the same way. It is the runtime's one
// settings type (run.Settings is this type): flags bind into it, the run
// records it as it is and resume, replay and eval read it back as it is,
// so a field added here is recorded without anything else to copy. Names
// are snake_case and durations are strings ("5m0s"); a zero duration is
// "0s". A record written before a field existed reads back with the
// field's zero value.
type RunSettings struct {
	// Mode is "react" (one agent) or "team" (a lead that dispatches
	// subagents, configured by Team).
	Mode   string         `json:"mode"`
	Team   TeamSettings   `json:"team"`
	Budget BudgetSettings `json:"budget"`
	// Context configures compaction; Window 0 is the model's own window,
	// filled in when the run starts.
	Context ContextSettings `json:"context"`
	// SoftDeadline and Timeout are measured from the start of the run;
	// zero disables them. Near the soft deadline (its last tenth) the agent
	// is told to wrap up; at it the loop ends and the work is salvaged; at
	// the hard timeout everything in flight is killed.
	SoftDeadline Duration `json:"soft_deadline"`
	Timeout      Duration `json:"timeout"`
	// Sandbox is the isolation asked for: "auto" or "" (bwrap if usable,
	// else native), "bwrap", "native" or "none"; run_started.sandbox says
	// what the run got.
	Sandbox string `json:"sandbox"`
	// Network lets commands reach the network: outbound only, through a
	// user-mode stack in their own network namespace, unless HostNetwork
	// shares the host's (loopback included).
	Network     bool `json:"network"`
	HostNetwork bool `json:"host_network,omitempty"`
	// NetworkAllow are prefixes (CIDR) an outbound sandbox may reach
	// although they are private, link-local or otherwise refused
	// (--network-allow).
	NetworkAllow []string `json:"network_allow,omitempty"`
	// Limits bound every sandboxed command.
	Limits LimitSettings `json:"limits,omitzero"`
	// CommandTimeout is bash's default timeout (0: 120 s); ScratchQuota
	// bounds /outputs/scratch in bytes (0: 256 MiB); MaxAttempts is the
	// attempts per model call.
	CommandTimeout Duration `json:"command_timeout"`
	ScratchQuota   int64    `json:"scratch_quota"`
	MaxAttempts    int      `json:"max_attempts"`
	// TaskFile and U0 (the objective as typed) are filled in when the run
	// starts, from its contract.
	TaskFile string `json:"task_file,omitempty"`
	U0       string `json:"u0,omitempty"`
	// RequireFinish keeps nudging agents that answer without a tool call;
	// otherwise a second tool-free reply in a row is taken as finish.
	RequireFinish bool             `json:"require_finish,omitempty"`
	Evidence      EvidenceSettings `json:"evidence"`
	// World names the stored world a rollout was built from (absent for
	// other runs); the world event repeats it.
	World *World `json:"world,omitempty"`
	// MCP names the MCP servers whose tools the run was given (their
	// configuration, secrets left out, is in the mcp_server events); a
	// resume starts the servers of these names from the configuration.
	MCP []string `json:"mcp,omitempty"`
	// Instructions are the project instructions (AGENTS.md, CLAUDE.md, the
	// user's own) that went into the system prompts (coordinator, subagents), as blobs,
	// in the order they appear there.
	Instructions []Instruction `json:"instructions,omitempty"`
	// Repo, for a run on a host tree (--repo), names the tree and the
	// baseline its /workspace was copied from.
	Repo *RepoSettings `json:"repo,omitempty"`
}

// RepoSettings: the run's /workspace began as a copy of a host tree.
type RepoSettings struct {
	Dir      string `json:"dir"`           // the host tree, absolute
	All      bool   `json:"all,omitempty"` // ignored files and .git were copied too
	Git      bool   `json:"git,omitempty"` // the tree was a git checkout
	Baseline string `json:"baseline"`      // blob of the baseline (repo.Baseline JSON)
	Files    int    `json:"files"`         // files copied
}

// Instruction is one project instructions file the system prompt quotes.
type Instruction struct {
	Source string `json:"source"` // the host file it was read from
	Ref    string `json:"ref"`    // the blob of its text as quoted
}

// LimitSettings are the per-command sandbox limits asked for (zero: the
// default); the sandbox settings record what was enforced and how.
type LimitSettings struct {
	MemLimit       int64 `json:"mem_limit,omitempty"`
	PidsLimit      int64 `json:"pids_limit,omitempty"`
	TmpSize        int64 `json:"tmp_size,omitempty"`
	WorkspaceQuota int64 `json:"workspace_quota,omitempty"`
	WorkspaceFiles int64 `json:"workspace_files,omitempty"`
	// WorkspaceShare is the most one command adds to /workspace, its quota
	// being a hard bound (--workspace-share); -1: measured instead.
	WorkspaceShare int64 `json:"workspace_share,omitempty"`
}

// EvidenceSettings is how the run's evidence plane was set up.
type EvidenceSettings struct {
	Corpus       bool `json:"corpus"`
	FetchPrivate bool `json:"fetch_private"`
}

// TeamSettings configures an Agent Team run.
type TeamSettings struct {
	Concurrency int            `json:"concurrency"`
	Isolation   string         `json:"isolation"`
	Plan        bool           `json:"plan"`
	SubBudget   BudgetSettings `json:"sub_budget"`
	SubTimeout  Duration       `json:"sub_timeout"`
	MergeIgnore []string       `json:"merge_ignore,omitempty"`
	// VerifyMaxTurns bounds each verifier's model calls (0: 6).
	VerifyMaxTurns int `json:"verify_max_turns"`
	// Effort is "adaptive" or "off" ("": off): at the lead's finish,
	// unsettled load-bearing claims are investigated in effort waves of
	// EffortWidth investigators per claim (0: 2), at most EffortWaves waves (0: 2).
	Effort      string `json:"effort"`
	EffortWidth int    `json:"effort_width"`
	EffortWaves int    `json:"effort_waves"`
	// EffortBudget is effort's token budget, in percent of the run's
	// tokens so far (0: the default, 25; < 0: no budget).
	EffortBudget int `json:"effort_budget"`
	// Synthesis is "on" or "off" ("": off): a writer writes the report
	// deliverables from the claim–evidence graph after finish.
	Synthesis string `json:"synthesis"`
}

// BudgetSettings is a loop's limits; zero means unlimited.
type BudgetSettings struct {
	MaxTurns     int `json:"max_turns"`
	MaxToolCalls int `json:"max_tool_calls"`
	MaxTokens    int `json:"max_tokens"`
}

// ContextSettings configures compaction.
type ContextSettings struct {
	Window     int     `json:"window"`
	At         float64 `json:"at"`
	To         float64 `json:"to"`
	KeepRecent int     `json:"keep_recent"`
	KeepTail   int     `json:"keep_tail"`
}

// Duration is a time.Duration recorded as its string ("1m30s").
type Duration time.Duration

// D is the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalText renders the duration as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a duration string ("5m0s").
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("record: duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}
