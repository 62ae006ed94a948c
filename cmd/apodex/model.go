package main

import (
	"fmt"
	"os"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/anthropic"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// modelFlags are the flags that choose and reach a model (R-UI-3).
type modelFlags struct {
	provider string
	model    string
	baseURL  string
	script   string
	noStream bool
}

func (m *modelFlags) register(fs *flagSet) {
	fs.StringVar(&m.provider, "provider", "", "model provider: openai (any OpenAI-compatible endpoint), anthropic or scripted;\ndefault: openai when OPENAI_BASE_URL or OPENAI_API_KEY is set, else anthropic when ANTHROPIC_API_KEY is set")
	fs.StringVar(&m.model, "model", "", "model name (default: $APODEX_MODEL, else gpt-4o-mini for openai, claude-sonnet-4-5 for anthropic)")
	fs.StringVar(&m.baseURL, "base-url", "", "endpoint base URL, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the hosted API)")
	fs.StringVar(&m.script, "script", "", "JSON script for --provider scripted (see examples/)")
	fs.BoolVar(&m.noStream, "no-stream", false, "ask for whole replies instead of streaming (SSE)")
}

// build returns the model and what to record about it. API keys come only
// from the environment, so they never appear in process listings or records.
func (m *modelFlags) build() (llm.Model, record.ModelSettings, error) {
	provider := m.provider
	if provider == "" {
		switch {
		case os.Getenv("OPENAI_BASE_URL") != "" || os.Getenv("OPENAI_API_KEY") != "":
			provider = "openai"
		case os.Getenv("ANTHROPIC_API_KEY") != "" || os.Getenv("ANTHROPIC_BASE_URL") != "":
			provider = "anthropic"
		default:
			return nil, record.ModelSettings{}, &run.ConfigError{Msg: "no model provider configured: pass --provider openai --base-url URL (or set OPENAI_BASE_URL), --provider anthropic with ANTHROPIC_API_KEY, or --provider scripted --script FILE"}
		}
	}
	name := m.model
	if name == "" {
		name = os.Getenv("APODEX_MODEL")
	}
	set := record.ModelSettings{Provider: provider, Stream: !m.noStream}
	switch provider {
	case "openai":
		if name == "" {
			name = "gpt-4o-mini"
		}
		base := firstNonEmpty(m.baseURL, os.Getenv("OPENAI_BASE_URL"), "https://api.openai.com/v1")
		set.Name, set.BaseURL = name, base
		return openai.New(openai.Config{BaseURL: base, APIKey: os.Getenv("OPENAI_API_KEY"), Model: name, Stream: !m.noStream}), set, nil
	case "anthropic":
		if name == "" {
			name = "claude-sonnet-4-5"
		}
		base := firstNonEmpty(m.baseURL, os.Getenv("ANTHROPIC_BASE_URL"), "https://api.anthropic.com")
		set.Name, set.BaseURL = name, base
		return anthropic.New(anthropic.Config{BaseURL: base, APIKey: os.Getenv("ANTHROPIC_API_KEY"), Model: name, Stream: !m.noStream}), set, nil
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
