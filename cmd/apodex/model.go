package main

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
	"github.com/apodex/apodex/internal/run"
)

// modelFlags are the model group: the flags that choose and reach a model
// (R-UI-3), and the config profile that may set them.
type modelFlags struct {
	provider string
	model    string
	baseURL  string
	script   string
	profile  string
	noStream bool
}

func (m *modelFlags) register(fs *flagSet) {
	fs.StringVar(&m.provider, "provider", "", "model provider: openai (any OpenAI-compatible endpoint), anthropic or scripted;\ndefault: openai when OPENAI_BASE_URL or OPENAI_API_KEY is set, else anthropic when ANTHROPIC_API_KEY is set")
	fs.StringVar(&m.model, "model", "", "model name (default: $APODEX_MODEL; required for a local OpenAI-compatible server; gpt-4o-mini on the hosted OpenAI API, claude-sonnet-4-5 on Anthropic's)")
	fs.StringVar(&m.baseURL, "base-url", "", "endpoint base URL, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the hosted API)")
	fs.StringVar(&m.script, "script", "", "JSON script for --provider scripted (see examples/)")
	fs.StringVar(&m.profile, "profile", "", "settings profile from config.toml ([profiles.NAME]; default: $APODEX_PROFILE, else the file's profile key)")
	fs.BoolVar(&m.noStream, "no-stream", false, "ask for whole replies instead of streaming (SSE)")
}

// Hosted endpoints.
const (
	openaiHosted    = "https://api.openai.com/v1"
	anthropicHosted = "https://api.anthropic.com"
)

// build returns the model and what to record about it. API keys come only
// from the environment, so they never appear in process listings or records.
// What cannot work (a hosted API without its key, a local server without a
// model name) is a *run.ConfigError naming what to set, before any request.
func (m *modelFlags) build() (llm.Model, record.ModelSettings, error) {
	provider := m.provider
	if provider == "" {
		switch {
		case os.Getenv("OPENAI_BASE_URL") != "" || os.Getenv("OPENAI_API_KEY") != "":
			provider = "openai"
		case os.Getenv("ANTHROPIC_API_KEY") != "" || os.Getenv("ANTHROPIC_BASE_URL") != "":
			provider = "anthropic"
		default:
			return nil, record.ModelSettings{}, &run.ConfigError{Msg: "no model provider configured: pass --provider openai --base-url URL --model NAME (or set OPENAI_BASE_URL), --provider anthropic with ANTHROPIC_API_KEY, --provider scripted --script FILE, or a profile in config.toml (`apodex config show` says what is set)"}
		}
	}
	name := firstNonEmpty(m.model, os.Getenv("APODEX_MODEL"))
	set := record.ModelSettings{Provider: provider, Stream: !m.noStream}
	switch provider {
	case "openai":
		base := firstNonEmpty(m.baseURL, os.Getenv("OPENAI_BASE_URL"), openaiHosted)
		key := os.Getenv("OPENAI_API_KEY")
		hosted := strings.TrimRight(base, "/") == openaiHosted
		switch {
		case hosted && key == "":
			return nil, set, &run.ConfigError{Msg: "--provider openai without OPENAI_API_KEY and without a base URL: set OPENAI_API_KEY for the hosted API, or pass --base-url http://HOST:PORT/v1 --model NAME for a local OpenAI-compatible server"}
		case !hosted && name == "":
			return nil, set, &run.ConfigError{Msg: fmt.Sprintf("--base-url %s without --model: pass --model NAME, the name the server serves (`apodex doctor --provider openai --base-url %s` lists them)", base, base)}
		case name == "":
			name = "gpt-4o-mini"
		}
		set.Name, set.BaseURL = name, base
		return openai.New(openai.Config{BaseURL: base, APIKey: key, Model: name, Stream: !m.noStream}), set, nil
	case "anthropic":
		base := firstNonEmpty(m.baseURL, os.Getenv("ANTHROPIC_BASE_URL"), anthropicHosted)
		key := os.Getenv("ANTHROPIC_API_KEY")
		if key == "" && strings.TrimRight(base, "/") == anthropicHosted {
			return nil, set, &run.ConfigError{Msg: "--provider anthropic without ANTHROPIC_API_KEY: set ANTHROPIC_API_KEY, or pass --base-url URL for a proxy that needs none"}
		}
		if name == "" {
			name = "claude-sonnet-4-5"
		}
		set.Name, set.BaseURL = name, base
		return anthropic.New(anthropic.Config{BaseURL: base, APIKey: key, Model: name, Stream: !m.noStream}), set, nil
	case "scripted":
		if m.script == "" {
			return nil, set, &run.ConfigError{Msg: "--provider scripted needs --script FILE (a JSON script; see examples/csv-sum/script.json)"}
		}
		model, err := scripted.Load(m.script)
		if err != nil {
			return nil, set, &run.ConfigError{Msg: fmt.Sprintf("cannot use script %s: %v", m.script, err)}
		}
		set.Name, set.Script, set.Stream = "scripted", m.script, false
		return model, set, nil
	default:
		return nil, set, &run.ConfigError{Msg: fmt.Sprintf("unknown provider %q: use openai, anthropic or scripted", provider)}
	}
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// fromRecord rebuilds the model a run was started with, from its record;
// flags given on the command line override the recorded values. Keys come
// from the environment, as always.
func (m *modelFlags) fromRecord(dir string, rec record.ModelSettings) (llm.Model, record.ModelSettings, error) {
	n := *m
	if n.provider == "" {
		n.provider = rec.Provider
	}
	if n.model == "" && rec.Provider == n.provider && n.provider != "scripted" {
		n.model = rec.Name
	}
	if n.baseURL == "" && rec.Provider == n.provider {
		n.baseURL = rec.BaseURL
	}
	if n.script == "" && n.provider == "scripted" {
		n.script = rec.Script
		if rec.ScriptRef != "" && dir != "" { // the run's own copy of the policy
			if p, err := record.BlobPath(dir, rec.ScriptRef); err == nil {
				n.script = p
			}
		}
	}
	if !rec.Stream && rec.Provider == n.provider {
		n.noStream = true
	}
	model, set, err := n.build()
	if err == nil && n.provider == "scripted" && n.script != m.script && rec.ScriptRef != "" {
		set.Script, set.ScriptRef = rec.Script, rec.ScriptRef
	}
	return model, set, err
}

// loggedModel logs every model call at debug level: who asked, how much,
// how long it took and how it ended.
func loggedModel(m llm.Model, lg *slog.Logger) llm.Model {
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
