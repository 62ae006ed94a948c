package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/run"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "[flags] OBJECTIVE", stderr)
	var (
		mf             modelFlags
		home, inputs   string
		sandboxKind    string
		network        bool
		jsonOut, quiet bool
		budget         agent.Budget
		cmdTimeout     time.Duration
		timeout, soft  time.Duration
		ctxw           agent.Context
		attempts       int
	)
	mf.register(fs)
	fs.StringVar(&inputs, "inputs", "", "directory whose files the agent sees, read-only, at /inputs")
	fs.StringVar(&home, "home", "", "where runs are kept (default: $APODEX_HOME, else ~/.apodex)")
	fs.IntVar(&budget.MaxTurns, "max-turns", 50, "stop after this many model calls (0: no limit)")
	fs.IntVar(&budget.MaxToolCalls, "max-tool-calls", 200, "stop after this many tool calls (0: no limit)")
	fs.IntVar(&budget.MaxTokens, "max-tokens", 2_000_000, "stop once this many tokens (prompt + completion, summed over calls) are used (0: no limit)")
	fs.DurationVar(&timeout, "timeout", 0, "hard wall-clock limit for the whole run, e.g. 15m (0: none)")
	fs.DurationVar(&soft, "soft-deadline", 0, "wall-clock soft deadline, e.g. 10m: near it the agent is told to wrap up, at it the loop ends and a tool-free call salvages a partial result (0: none)")
	fs.IntVar(&ctxw.Window, "context-window", 0, "the model's context window in tokens (default: known for common model names, else 32768)")
	fs.Float64Var(&ctxw.At, "compact-at", 0.8, "compact the context when the prompt reaches this fraction of the window")
	fs.Float64Var(&ctxw.To, "compact-to", 0.5, "compaction aims for this fraction of the window")
	fs.DurationVar(&cmdTimeout, "command-timeout", 120*time.Second, "default timeout of one bash command")
	fs.IntVar(&attempts, "retries", 6, "attempts per model call on 429, 5xx and connection errors")
	fs.StringVar(&sandboxKind, "sandbox", "bwrap", "bwrap (isolated, the default) or none (no isolation: only if you trust the model with your machine)")
	fs.BoolVar(&network, "network", false, "let sandboxed commands use the network")
	fs.BoolVar(&jsonOut, "json", false, "print a JSON summary on stdout")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	objective := strings.TrimSpace(strings.Join(pos, " "))
	if objective == "" {
		fmt.Fprintln(stderr, "apodex run: no objective: pass what the agent should do, e.g. apodex run --inputs ./data \"Sum the value column of /inputs/data.csv\"")
		return exitUsage
	}
	if sandboxKind != "bwrap" && sandboxKind != "none" {
		fmt.Fprintf(stderr, "apodex run: --sandbox %q: use bwrap or none\n", sandboxKind)
		return exitUsage
	}
	if budget.MaxTurns < 0 || budget.MaxToolCalls < 0 || budget.MaxTokens < 0 || attempts < 1 || timeout < 0 || soft < 0 || cmdTimeout <= 0 || ctxw.Window < 0 {
		fmt.Fprintln(stderr, "apodex run: budgets, deadlines and --context-window must be ≥ 0, --retries ≥ 1 and --command-timeout > 0")
		return exitUsage
	}
	if ctxw.At <= 0 || ctxw.At > 1 || ctxw.To <= 0 || ctxw.To >= ctxw.At {
		fmt.Fprintln(stderr, "apodex run: need 0 < --compact-to < --compact-at ≤ 1 (e.g. --compact-at 0.8 --compact-to 0.5)")
		return exitUsage
	}
	model, info, err := mf.build()
	if err != nil {
		fmt.Fprintf(stderr, "apodex run: %v\n", err)
		return exitUsage
	}
	cfg := run.Config{
		Home: homeDir(home), Objective: objective, InputsDir: inputs,
		Model: model, ModelInfo: info, Budget: budget,
		Sandbox: sandboxKind, Network: network, CommandTimeout: cmdTimeout,
		Retry: llm.RetryPolicy{MaxAttempts: attempts}, Context: ctxw, SoftDeadline: soft, Timeout: timeout,
	}
	if !quiet {
		cfg.Progress = stderr
		fmt.Fprintf(stderr, "apodex: run with %s model %s\n", info.Provider, info.Name)
	}
	s, err := run.Execute(ctx, cfg)
	var cerr *run.ConfigError
	if errors.As(err, &cerr) {
		fmt.Fprintf(stderr, "apodex run: %v\n", err)
		return exitUsage
	}
	if err != nil && s.RunID == "" {
		fmt.Fprintf(stderr, "apodex run: %v\n", err)
		return exitFailed
	}
	if err != nil {
		fmt.Fprintf(stderr, "apodex run: %v\n", err)
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(s)
	} else {
		printSummary(stdout, s)
	}
	if s.Status != run.StatusCompleted {
		if !quiet && !jsonOut && s.Error != "" {
			fmt.Fprintf(stderr, "apodex run: ended with %s: %s\n", s.Termination, oneLine(s.Error))
		}
		return exitFailed
	}
	return exitOK
}

func printSummary(w io.Writer, s run.Summary) {
	fmt.Fprintf(w, "run %s: %s (%s)\n", s.RunID, s.Status, s.Termination)
	if s.Summary != "" {
		fmt.Fprintf(w, "summary: %s\n", oneLine(s.Summary))
	}
	if s.Partial != "" {
		fmt.Fprintf(w, "partial result: %s\n", s.Partial)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "error: %s\n", oneLine(s.Error))
	}
	fmt.Fprintf(w, "turns %d, tool calls %d, tokens %d (prompt %d, completion %d)\n",
		s.Turns, s.ToolCalls, s.Usage.TotalTokens, s.Usage.PromptTokens, s.Usage.CompletionTokens)
	fmt.Fprintf(w, "record: %s/events.jsonl\n", s.RunDir)
	if len(s.Files) > 0 {
		fmt.Fprintf(w, "files (under %s):\n", s.RunDir)
		for _, f := range s.Files {
			fmt.Fprintf(w, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256)
		}
	}
}

func version() string { return run.Version }
