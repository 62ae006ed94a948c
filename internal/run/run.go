// Package run assembles one run: its directory under <home>/runs/<run-id>/,
// the record, the planes, the sandbox, the tools and the agent, and closes the
// record with the termination reason.
//
// Guarantees:
//   - a run directory holds events.jsonl, blobs/, inputs/ (a copy of the
//     user's inputs, hashed in run_started), workspace/ and outputs/;
//   - run_started is the first event and run_finished the last one of every
//     run that ends in this process, whatever the termination;
//   - configuration problems (missing inputs, unwritable home) are reported
//     as *ConfigError before anything is created;
//   - running without isolation happens only when asked (Sandbox "none") and
//     is recorded as a warning event.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// Version is the runtime's version, recorded in every run.
const Version = "0.1.0"

// ConfigError is a problem with what the user asked for; nothing was run.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Config is one run's settings. Flags are parsed elsewhere.
type Config struct {
	Home      string
	Objective string
	InputsDir string // optional; copied read-only into the run
	Model     llm.Model
	ModelInfo record.ModelSettings
	Budget    agent.Budget
	// Context configures compaction; Window 0 picks the model's window.
	Context agent.Context
	// SoftDeadline and Timeout are measured from the start of the run; zero
	// disables them. Near the soft deadline (the last tenth of it) the agent
	// is told to wrap up; at it, the loop ends and the work is salvaged; at
	// the hard timeout everything in flight is killed.
	SoftDeadline, Timeout time.Duration
	// Sandbox is "bwrap", "none" or "" (bwrap, refusing bash if unavailable).
	Sandbox string
	Network bool
	// CommandTimeout is bash's default timeout; 0 means 120 s.
	CommandTimeout time.Duration
	Retry          llm.RetryPolicy
	// Progress receives one line per step; nil for none.
	Progress io.Writer
	Now      func() time.Time
	NewID    func() string
}

// Summary is what a finished run reports (the --json object).
type Summary struct {
	RunID       string             `json:"run_id"`
	RunDir      string             `json:"run_dir"`
	Status      string             `json:"status"`
	Termination string             `json:"termination_reason"`
	Summary     string             `json:"summary,omitempty"`
	Partial     string             `json:"partial_result,omitempty"`
	Error       string             `json:"error,omitempty"`
	Usage       llm.Usage          `json:"usage"`
	Turns       int                `json:"turns"`
	ToolCalls   int                `json:"tool_calls"`
	Files       []record.FileEntry `json:"files"`
	Sandbox     string             `json:"sandbox"`
	Warnings    []string           `json:"warnings,omitempty"`
}

// Status of a run as shown to users.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusRunning   = "running" // no run_finished yet: live, or interrupted
)

// Execute performs one run. The error is non-nil only when the run could not
// start; how a started run ended is in the Summary.
func Execute(ctx context.Context, cfg Config) (Summary, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return NewID(cfg.Now()) }
	}
	if cfg.Model == nil {
		return Summary{}, &ConfigError{"no model configured: pass --provider (openai, anthropic or scripted)"}
	}
	if err := checkInputs(cfg.InputsDir); err != nil {
		return Summary{}, err
	}
	id := cfg.NewID()
	dir := filepath.Join(cfg.Home, "runs", id)
	fs, err := makeRunDir(dir)
	if err != nil {
		return Summary{}, err
	}
	log, err := record.Create(dir, cfg.Now)
	if err != nil {
		return Summary{}, &ConfigError{fmt.Sprintf("cannot create the record in %s: %v", dir, err)}
	}
	start := cfg.Now()
	s := Summary{RunID: id, RunDir: dir}
	inputs, err := copyInputs(cfg.InputsDir, fs.Inputs)
	if err != nil {
		log.Close()
		return Summary{}, &ConfigError{fmt.Sprintf("cannot copy inputs from %s: %v", cfg.InputsDir, err)}
	}

	runner, sbx, warn := chooseSandbox(cfg.Sandbox, cfg.Network)
	s.Sandbox = sbx.Kind
	tools := tool.NewSet(append(tool.Builtins(tool.Env{FS: fs, Runner: runner, Network: cfg.Network, DefaultTimeout: cfg.CommandTimeout}), tool.FinishTool{})...)
	budget := record.Budget{MaxTurns: cfg.Budget.MaxTurns, MaxToolCalls: cfg.Budget.MaxToolCalls, MaxTokens: cfg.Budget.MaxTokens,
		SoftDeadline: cfg.SoftDeadline.String(), Timeout: cfg.Timeout.String()}
	if cfg.Context.Window <= 0 {
		cfg.Context.Window = llm.ContextWindow(cfg.ModelInfo.Name)
	}
	cfg.Context = cfg.Context.WithDefaults()
	if _, err := log.Append(record.TypeRunStarted, "", record.RunStarted{
		RunID: id, Objective: cfg.Objective, Model: cfg.ModelInfo, Sandbox: sbx, Budget: budget,
		Inputs: inputs, Tools: tools.Names(), Versions: map[string]string{"apodex": Version, "sandbox": sbx.Version},
		Settings: map[string]any{"context_window": cfg.Context.Window, "compact_at": cfg.Context.At, "compact_to": cfg.Context.To},
	}); err != nil {
		log.Close()
		return Summary{}, fmt.Errorf("run: write the record: %w", err)
	}
	if warn != nil {
		s.Warnings = append(s.Warnings, warn.Message)
		log.Append(record.TypeWarning, "", warn)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "WARNING: %s\n", warn.Message)
		}
	}

	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.Timeout, agent.ErrHardTimeout)
		defer cancel()
	}
	var dl agent.Deadlines
	if cfg.SoftDeadline > 0 {
		dl = agent.Deadlines{Soft: start.Add(cfg.SoftDeadline), WrapUp: cfg.SoftDeadline / 10}
	}
	out := agent.Run(ctx, agent.Config{
		ID: "main", Model: cfg.Model, Tools: tools, Log: log, FS: fs,
		System: systemPrompt(tools.Names()), Budget: cfg.Budget, Retry: cfg.Retry,
		Context: cfg.Context, Deadlines: dl,
		OnStep: progress(cfg.Progress), Now: cfg.Now,
	}, cfg.Objective)

	s.Termination = string(out.Termination)
	s.Summary, s.Partial, s.Usage, s.Turns, s.ToolCalls = out.Summary, out.Partial, out.Usage, out.Turns, out.ToolCalls
	s.Status = StatusFailed
	if out.Termination == agent.Completed {
		s.Status = StatusCompleted
	}
	if out.Err != nil {
		s.Error = out.Err.Error()
	}
	s.Files = producedFiles(fs)
	_, ferr := log.Append(record.TypeRunFinished, "", record.RunFinished{
		Termination: s.Termination, Status: s.Status, Summary: s.Summary, Partial: s.Partial, Error: s.Error,
		Turns: s.Turns, ToolCalls: s.ToolCalls, Usage: s.Usage, Files: s.Files,
		DurationMS: cfg.Now().Sub(start).Milliseconds(), Time: cfg.Now(),
	})
	if err := errors.Join(ferr, log.Close()); err != nil {
		return s, fmt.Errorf("run: close the record: %w", err)
	}
	return s, nil
}

// NewID is a sortable, unique run id: UTC time and 3 random bytes.
func NewID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func checkInputs(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return &ConfigError{fmt.Sprintf("inputs directory %s does not exist: pass --inputs an existing directory", dir)}
	}
	if !st.IsDir() {
		return &ConfigError{fmt.Sprintf("inputs %s is not a directory: pass --inputs a directory", dir)}
	}
	return nil
}

func makeRunDir(dir string) (*workspace.FS, error) {
	fs := &workspace.FS{
		Inputs:    filepath.Join(dir, "inputs"),
		Workspace: filepath.Join(dir, "workspace"),
		Outputs:   filepath.Join(dir, "outputs"),
	}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, &ConfigError{fmt.Sprintf("cannot create the run directory %s: %v; pass --home (or set APODEX_HOME) to a writable directory", dir, err)}
		}
	}
	return fs, nil
}

func chooseSandbox(kind string, network bool) (sandbox.Runner, record.SandboxSettings, *record.Warning) {
	set := record.SandboxSettings{Kind: "bwrap", Network: network}
	if kind == "none" {
		set.Kind = "none"
		return sandbox.None{}, set, &record.Warning{Code: "no_sandbox", Message: "--sandbox none: shell commands run WITHOUT isolation, with your user's full access to this machine; this run is not trainable"}
	}
	r, err := sandbox.New("bwrap")
	if err != nil {
		set.Kind = "unavailable"
		return nil, set, &record.Warning{Code: "sandbox_unavailable", Message: err.Error() + "; bash calls will be refused"}
	}
	set.Version = sandbox.Version()
	return r, set, nil
}

func progress(w io.Writer) func(agent.Step) {
	if w == nil {
		return nil
	}
	return func(s agent.Step) {
		mark := "ok"
		if s.IsError {
			mark = "ERR"
		}
		fmt.Fprintf(w, "[%s] turn %d %s %s -> %s %s\n", s.Agent, s.Turn, s.Tool, s.Args, mark, s.Output)
	}
}
