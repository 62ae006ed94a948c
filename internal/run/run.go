// Package run assembles one run: its directory under <home>/runs/<run-id>/,
// the record, the planes, the publication plane, the sandbox, the tools and
// the agent; after the agent stops it reconciles the delivery, runs the task
// verifier and closes the record with the termination reason.
//
// Guarantees:
//   - a run directory holds events.jsonl, blobs/, inputs/ (a copy of the
//     user's inputs, hashed in run_started), workspace/ and outputs/;
//   - run_started is the first event and run_finished the last one of every
//     run that ends in this process, whatever the termination;
//   - configuration problems (missing inputs, unwritable home) are reported
//     as *ConfigError before anything is created;
//   - status is "completed" only when the agent finished and the final gate
//     passed: every declared output reconciled and, under a contract, every
//     deliverable constraint and verification clause held; otherwise the
//     failures are named and the termination is gate_failed;
//   - running without isolation happens only when asked (Sandbox "none") and
//     is recorded as a warning event;
//   - every finished run is marked trainable or not, with the reasons
//     (Trainability); package replay re-executes one and compares.
//
// Live control (pause, cancel, budgets, message delivery) is package live,
// the read models (show, status, runs) package runview, the task kept in
// the run package taskstore; what a run starts from (run directory, inputs,
// --repo) is run/stage, its evidence plane run/evidenceplane, its final gate
// (check_deliverables, the repair turn, the verdict, apodex verify)
// run/gate. The names run re-exports keep callers working.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/clock"
	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/publish"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run/evidenceplane"
	"github.com/apodex/apodex/internal/run/stage"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/taskstore"
	"github.com/apodex/apodex/internal/verify"
	"github.com/apodex/apodex/internal/version"
	"github.com/apodex/apodex/internal/world"
)

// ConfigError is a problem with what the user asked for; nothing was run.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Config is one run: its Settings and what it runs on. Flags are parsed
// elsewhere.
type Config struct {
	// Settings are recorded in run_started as they are once the run has
	// started (with the context window, the task file, the objective as
	// typed and the world filled in); a resume and a replay run with them.
	Settings
	Home      string
	Objective string
	// Contract, if set, supplies the objective, inputs, deliverables and
	// verification clauses (R-CONTRACT); Objective and InputsDir, when also
	// set, override its own.
	Contract  *contract.Contract
	InputsDir string // optional; copied read-only into the run
	// CorpusDir is a host directory of documents, copied read-only to
	// /inputs/corpus and indexed (R-SEARCH); it overrides the contract's
	// corpus key. A run whose inputs already hold the corpus (a replay)
	// says so with Settings.Evidence.Corpus instead.
	CorpusDir string
	// EvidenceFrom, in a replay, is the original run's directory: fetches
	// of URLs are served from its evidence, never from the network.
	EvidenceFrom string
	// MCP are the MCP servers whose tools the run's agents get (their
	// names are recorded in Settings.MCP); MCPFrom, in a replay, is the
	// original run's directory: its MCP results are served from its
	// record and no server is started.
	MCP       []config.MCPServer
	MCPFrom   string
	Model     llm.Model
	ModelInfo record.ModelSettings
	// World, when set, makes the run a rollout of that stored world: its
	// inputs and /workspace come from the store (see stageWorld), and the
	// record names the world and its generator version.
	World *world.World
	// ReleaseWorld: the run is World's only user, so its file list and
	// seal are dropped from memory once the workspace is no longer
	// watched, before the run's last writes (world.Rollout.Release).
	ReleaseWorld bool
	// Repo, when set, is a host tree whose files (RepoAll: ignored ones and
	// .git too) are copied into /workspace at the start, with a baseline
	// for apodex diff and apply; the tree itself is never written.
	// RepoFrom, in a replay, is the original run: its baseline is staged.
	Repo     string
	RepoAll  bool
	RepoFrom string
	// Instructions are the project instructions quoted in the
	// coordinator's system prompt; the run keeps them as blobs
	// (Settings.Instructions), which a resume quotes.
	Instructions []Instruction
	// Progress receives one line per step; nil for none.
	Progress io.Writer
	// Logger receives the runtime's debug log (steps, lifecycle); nil for
	// none. The CLI's --log-level writes it into the run directory.
	Logger *slog.Logger
	// OnLog, when set, is called with the run's log as soon as it is open
	// (created, or reopened by a resume), before this segment appends to
	// it: consumers in this process (the progress printer, telemetry)
	// subscribe to it (record.Log.Subscribe) instead of polling the file.
	OnLog func(*record.Log)
	// Clock is the run's one time source: the record's times, deadlines,
	// the hard timeout, retry backoff, team waits; nil is the system
	// clock.
	Clock clock.Clock
	NewID func() string
	// Halt, when closed, stops the run the way a kill would: its agents are
	// cancelled, nothing is concluded and no run_finished is written, so
	// the run can be resumed; Execute and Resume then return ErrHalted.
	// Replay plays the segments of a resumed run with it.
	Halt <-chan struct{}
	// HaltNote, when set, is recorded (a "stopped" warning) when Halt
	// stops the run: why it stopped, for the user and for resume.
	HaltNote string
}

// StatusStopped: the run stopped before its end and can be resumed
// (Ctrl-C, SIGTERM, a kill, a crash).
const StatusStopped = runview.StatusStopped

// ErrHalted: the run was stopped through Config.Halt and can be resumed.
var ErrHalted = errors.New("run: halted (resumable)")

// Summary is what a finished run reports (the --json object).
type Summary struct {
	RunID       string             `json:"run_id"`
	RunDir      string             `json:"run_dir"`
	Status      string             `json:"status"`
	Termination string             `json:"termination_reason"`
	Summary     string             `json:"summary,omitempty"`
	Partial     string             `json:"partial_result,omitempty"`
	Error       string             `json:"error,omitempty"`
	Failures    []string           `json:"failures,omitempty"`
	Usage       llm.Usage          `json:"usage"`
	Turns       int                `json:"turns"`
	ToolCalls   int                `json:"tool_calls"`
	Files       []record.FileEntry `json:"files"`
	// FilesOmitted counts the files Files leaves out (record.MaxFilesListed).
	FilesOmitted int `json:"files_omitted,omitempty"`
	// WorldFiles counts a world rollout's files left as the world has
	// them, which Files does not list (record.RunFinished.WorldFiles).
	WorldFiles int               `json:"world_files,omitempty"`
	Delivery   *publish.Delivery `json:"delivery,omitempty"`
	Checks     []check.Finding   `json:"checks,omitempty"`
	Verify     []verify.Result   `json:"verification,omitempty"`
	Sandbox    string            `json:"sandbox"`
	Warnings   []string          `json:"warnings,omitempty"`
	// Trainable and NotTrainable: see Trainability; computed once the
	// record is closed.
	Trainable    bool     `json:"trainable"`
	NotTrainable []string `json:"not_trainable,omitempty"`
}

// Status of a run as shown to users.
const (
	StatusCompleted = runview.StatusCompleted
	StatusFailed    = runview.StatusFailed
	StatusRunning   = runview.StatusRunning // no run_finished yet: live, or interrupted
	// StatusAwaitingReview: everything else passed and a human clause
	// waits for apodex review (a review event decides it).
	StatusAwaitingReview = runview.StatusAwaitingReview
)

// Execute performs one run. The error is non-nil only when the run could not
// start; how a started run ended is in the Summary.
func Execute(ctx context.Context, cfg Config) (Summary, error) {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return NewID(cfg.Clock.Now()) }
	}
	if cfg.Model == nil {
		return Summary{}, &ConfigError{"no model configured: pass --provider (openai, anthropic or scripted)"}
	}
	c := cfg.Contract
	if c == nil {
		c = contract.FromObjective(cfg.Objective)
	} else if cfg.Objective != "" {
		c.SetObjective(cfg.Objective)
	}
	if err := c.RequireObjective(); err != nil {
		return Summary{}, &ConfigError{err.Error()}
	}
	if cfg.InputsDir != "" {
		c.Inputs = cfg.InputsDir
	}
	if err := stage.CheckInputs(c.Inputs, cfg.Home); err != nil {
		return Summary{}, configErr(err)
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return Summary{}, &ConfigError{fmt.Sprintf("bad home %q: %v", cfg.Home, err)}
	}
	id := cfg.NewID()
	dir := filepath.Join(home, "runs", id)
	fs, err := stage.MakeRunDir(dir)
	if err != nil {
		return Summary{}, configErr(err)
	}
	log, err := record.Create(dir, cfg.Clock.Now)
	if err != nil {
		return Summary{}, &ConfigError{fmt.Sprintf("cannot create the record in %s: %v", dir, err)}
	}
	if cfg.OnLog != nil {
		cfg.OnLog(log)
	}
	var roll *world.Rollout
	var inputs []record.FileEntry
	if cfg.World != nil {
		if roll, err = stageWorld(cfg.World, dir, fs); err == nil {
			inputs = roll.Inputs
			defer roll.Finish() // on every early return; a no-op after the one below
		}
	} else {
		inputs, err = stage.CopyInputs(c.Inputs, fs.Inputs)
	}
	if err != nil {
		log.Close()
		os.RemoveAll(dir)
		if cfg.World != nil {
			return Summary{}, &ConfigError{fmt.Sprintf("cannot stage world %s: %v", cfg.World.ID, err)}
		}
		return Summary{}, &ConfigError{fmt.Sprintf("cannot copy inputs from %s: %v", c.Inputs, err)}
	}
	more, corpus, err := evidenceplane.CopyCorpus(&cfg.CorpusDir, cfg.Home, c, fs)
	cfg.Evidence.Corpus = cfg.Evidence.Corpus || corpus
	if err != nil {
		log.Close()
		os.RemoveAll(dir)
		return Summary{}, configErr(err)
	}
	inputs = append(inputs, more...)
	cfg.Settings.Repo = nil
	if cfg.Repo != "" || cfg.RepoFrom != "" {
		if cfg.World != nil {
			err = &ConfigError{"--repo and --world both set /workspace: pass one"}
		} else {
			cfg.Settings.Repo, err = stage.Repo(stage.RepoOptions{Repo: cfg.Repo, All: cfg.RepoAll, From: cfg.RepoFrom, Home: cfg.Home}, log, fs.Workspace)
			err = configErr(err)
		}
		if err != nil {
			log.Close()
			os.RemoveAll(dir)
			return Summary{}, err
		}
	}
	if cfg.Context.Window <= 0 {
		cfg.Context.Window = llm.ContextWindow(cfg.ModelInfo.Name)
	}
	cfg.Context = record.ContextSettings(contextOf(cfg.Context).WithDefaults())
	cfg.TaskFile, cfg.U0, cfg.Settings.World = c.File, c.U0, nil
	if cfg.MCPFrom == "" {
		cfg.Settings.MCP = mcpNames(cfg.MCP)
	}
	if roll != nil {
		w := roll.Record
		cfg.Settings.World = &w // Config.World is the stored world it was built from
	}
	if cfg.Settings.Instructions, err = storeInstructions(log, cfg.Instructions); err != nil {
		log.Close()
		os.RemoveAll(dir)
		return Summary{}, err
	}
	ss, err := open(cfg, id, dir, fs, log, c)
	if err != nil {
		log.Close()
		return Summary{}, err
	}
	ss.roll = roll
	defer ss.close()
	if p := cfg.ModelInfo.Script; p != "" && cfg.ModelInfo.ScriptRef == "" {
		// The run keeps the policy it plays, for resume.
		if data, err := os.ReadFile(p); err == nil {
			cfg.ModelInfo.ScriptRef, _ = log.PutBlob(data)
		}
	}
	budget := record.Budget{MaxTurns: cfg.Budget.MaxTurns, MaxToolCalls: cfg.Budget.MaxToolCalls, MaxTokens: cfg.Budget.MaxTokens,
		SoftDeadline: durationOf(cfg.SoftDeadline).String(), Timeout: durationOf(cfg.Timeout).String()}
	set := cfg.Settings                            // recorded as it is
	if err := ss.startMCP(ctx, true); err != nil { // before run_started, which names their tools
		return Summary{}, err
	}
	_, err = log.Append(record.TypeRunStarted, "", record.RunStarted{
		RunID: id, Objective: c.Objective, Model: cfg.ModelInfo, Sandbox: ss.sbx, Budget: budget,
		Inputs: inputs, Tools: ss.toolNames(), MCP: ss.kit.hub.Offered(), Versions: map[string]string{"apodex": version.Runtime, "sandbox": ss.sbx.Version},
		Settings: &set,
	})
	ss.kit.hub.Release() // the servers' events go after run_started
	if err != nil {
		return Summary{}, fmt.Errorf("run: write the record: %w", err)
	}
	if roll != nil {
		log.Append(record.TypeWorld, "", roll.Record)
	}
	// The run keeps its own copy of the task and works from it: the task
	// file may move or go once the run has started.
	ce := taskstore.Event(c)
	if err := taskstore.Store(log, c, &ce); err != nil {
		ce.TaskRef, ce.Files = "", nil
		appendEvent(log, record.TypeWarning, "", record.Warning{Code: "task", Message: fmt.Sprintf("the run could not keep its own copy of the task (%v): verify and resume will read the task file %s", err, c.File)})
	}
	log.Append(record.TypeContract, "", ce)
	if ce.TaskRef != "" {
		if kept, err := taskstore.Materialize(dir, ce); err == nil {
			ss.c = kept
		} else {
			appendEvent(log, record.TypeWarning, "", record.Warning{Code: "task", Message: fmt.Sprintf("the run works from the task file %s: its own copy did not load (%v)", c.File, err)})
		}
	}
	cfg.Logger.Debug("run started", "run", id, "dir", dir, "provider", cfg.ModelInfo.Provider, "model", cfg.ModelInfo.Name,
		"base_url", cfg.ModelInfo.BaseURL, "sandbox", ss.sbx.Kind, "mode", cfg.Mode)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "apodex: run %s with %s model %s; record in %s\n", id, cfg.ModelInfo.Provider, cfg.ModelInfo.Name, dir)
	}
	ss.warnSandbox()
	s, err := ss.run(ctx, nil)
	if roll != nil {
		if ferr := roll.Finish(); ferr != nil { // a run that stopped before finishWorld
			s.Warnings = append(s.Warnings, "the rollout's workspace was not kept: "+ferr.Error())
		}
	}
	return s, err
}
