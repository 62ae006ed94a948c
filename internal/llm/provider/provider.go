// Package provider builds the model a run talks to from a Spec (provider,
// model name, endpoint, script) and the environment, or rebuilds it from a
// run's recorded model settings.
//
// Guarantees:
//   - API keys are read only from the environment (OPENAI_API_KEY,
//     ANTHROPIC_API_KEY); they are never part of a Spec or of the
//     record.ModelSettings returned, so they never reach a record;
//   - a setting that cannot work (no provider, a hosted API without its
//     key, a local server without a model name, an unreadable script) is a
//     *ConfigError that names what to set, returned before any request.
package provider

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/anthropic"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
)

// Spec chooses and reaches a model; empty fields fall back to the
// environment and then to each provider's default.
type Spec struct {
	Provider string // openai, anthropic or scripted; "" picks by environment
	Model    string
	BaseURL  string
	Script   string // the JSON script of the scripted provider
	NoStream bool
}

// ConfigError is a model setting that cannot work; nothing was requested.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Hosted endpoints.
const (
	openaiHosted    = "https://api.openai.com/v1"
	anthropicHosted = "https://api.anthropic.com"
)

// Build returns the model and what to record about it. API keys come only
// from the environment, so they never appear in process listings or records.
// What cannot work (a hosted API without its key, a local server without a
// model name) is a *ConfigError naming what to set, before any request.
func Build(m Spec) (llm.Model, record.ModelSettings, error) {
	provider := m.Provider
	if provider == "" {
		switch {
		case os.Getenv("OPENAI_BASE_URL") != "" || os.Getenv("OPENAI_API_KEY") != "":
			provider = "openai"
		case os.Getenv("ANTHROPIC_API_KEY") != "" || os.Getenv("ANTHROPIC_BASE_URL") != "":
			provider = "anthropic"
		default:
			return nil, record.ModelSettings{}, &ConfigError{Msg: "no model provider configured: pass --provider openai --base-url URL --model NAME (or set OPENAI_BASE_URL), --provider anthropic with ANTHROPIC_API_KEY, --provider scripted --script FILE, or a profile in config.toml (`apodex config show` says what is set)"}
		}
	}
	name := FirstNonEmpty(m.Model, os.Getenv("APODEX_MODEL"))
	set := record.ModelSettings{Provider: provider, Stream: !m.NoStream}
	switch provider {
	case "openai":
		base := FirstNonEmpty(m.BaseURL, os.Getenv("OPENAI_BASE_URL"), openaiHosted)
		key := os.Getenv("OPENAI_API_KEY")
		hosted := strings.TrimRight(base, "/") == openaiHosted
		switch {
		case hosted && key == "":
			return nil, set, &ConfigError{Msg: "--provider openai without OPENAI_API_KEY and without a base URL: set OPENAI_API_KEY for the hosted API, or pass --base-url http://HOST:PORT/v1 --model NAME for a local OpenAI-compatible server"}
		case !hosted && name == "":
			return nil, set, &ConfigError{Msg: fmt.Sprintf("--base-url %s without --model: pass --model NAME, the name the server serves (`apodex doctor --provider openai --base-url %s` lists them)", base, base)}
		case name == "":
			name = "gpt-4o-mini"
		}
		set.Name, set.BaseURL = name, base
		return openai.New(openai.Config{BaseURL: base, APIKey: key, Model: name, Stream: !m.NoStream}), set, nil
	case "anthropic":
		base := FirstNonEmpty(m.BaseURL, os.Getenv("ANTHROPIC_BASE_URL"), anthropicHosted)
		key := os.Getenv("ANTHROPIC_API_KEY")
		if key == "" && strings.TrimRight(base, "/") == anthropicHosted {
			return nil, set, &ConfigError{Msg: "--provider anthropic without ANTHROPIC_API_KEY: set ANTHROPIC_API_KEY, or pass --base-url URL for a proxy that needs none"}
		}
		if name == "" {
			name = "claude-sonnet-4-5"
		}
		set.Name, set.BaseURL = name, base
		return anthropic.New(anthropic.Config{BaseURL: base, APIKey: key, Model: name, Stream: !m.NoStream}), set, nil
	case "scripted":
		if m.Script == "" {
			return nil, set, &ConfigError{Msg: "--provider scripted needs --script FILE (a JSON script; see examples/csv-sum/script.json)"}
		}
		model, err := scripted.Load(m.Script)
		if err != nil {
			return nil, set, &ConfigError{Msg: fmt.Sprintf("cannot use script %s: %v", m.Script, err)}
		}
		set.Name, set.Script, set.Stream = "scripted", m.Script, false
		return model, set, nil
	default:
		return nil, set, &ConfigError{Msg: fmt.Sprintf("unknown provider %q: use openai, anthropic or scripted", provider)}
	}
}

// FirstNonEmpty is the first of vals that is not empty.
func FirstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// FromRecord rebuilds the model a run was started with, from its record;
// what m sets (the command line) overrides the recorded values. Keys come
// from the environment, as always. dir is the run directory, whose copy of
// a scripted policy is used when the record has one.
func FromRecord(m Spec, dir string, rec record.ModelSettings) (llm.Model, record.ModelSettings, error) {
	n := m
	if n.Provider == "" {
		n.Provider = rec.Provider
	}
	if n.Model == "" && rec.Provider == n.Provider && n.Provider != "scripted" {
		n.Model = rec.Name
	}
	if n.BaseURL == "" && rec.Provider == n.Provider {
		n.BaseURL = rec.BaseURL
	}
	if n.Script == "" && n.Provider == "scripted" {
		n.Script = rec.Script
		if rec.ScriptRef != "" && dir != "" { // the run's own copy of the policy
			if p, err := record.BlobPath(dir, rec.ScriptRef); err == nil {
				n.Script = p
			}
		}
	}
	if !rec.Stream && rec.Provider == n.Provider {
		n.NoStream = true
	}
	model, set, err := Build(n)
	if err == nil && n.Provider == "scripted" && n.Script != m.Script && rec.ScriptRef != "" {
		set.Script, set.ScriptRef = rec.Script, rec.ScriptRef
	}
	return model, set, err
}

// Logged logs every model call of m at debug level: who asked, how much,
// how long it took and how it ended.
func Logged(m llm.Model, lg *slog.Logger) llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		start := time.Now()
		lg.Debug("model request", "agent", req.Agent, "turn", req.Turn, "purpose", req.Purpose, "messages", len(req.Messages), "tools", len(req.Tools))
		resp, err := m.Generate(ctx, req)
		if err != nil {
			lg.Debug("model error", "agent", req.Agent, "turn", req.Turn, "duration", time.Since(start), "error", err.Error())
			return resp, err
		}
		lg.Debug("model response", "agent", req.Agent, "turn", req.Turn, "duration", time.Since(start), "finish", resp.FinishReason,
			"tool_calls", len(resp.Message.ToolCalls), "prompt_tokens", resp.Usage.PromptTokens, "completion_tokens", resp.Usage.CompletionTokens)
		return resp, nil
	})
}
