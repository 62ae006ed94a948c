package main

import (
	"errors"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/provider"
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

func (m *modelFlags) spec() provider.Spec {
	return provider.Spec{Provider: m.provider, Model: m.model, BaseURL: m.baseURL, Script: m.script, NoStream: m.noStream}
}

// build returns the model and what to record about it (provider.Build);
// what cannot work is a *run.ConfigError, a usage error.
func (m *modelFlags) build() (llm.Model, record.ModelSettings, error) {
	return asConfigError(provider.Build(m.spec()))
}

// fromRecord rebuilds the model a run was started with, from its record;
// flags given on the command line override the recorded values.
func (m *modelFlags) fromRecord(dir string, rec record.ModelSettings) (llm.Model, record.ModelSettings, error) {
	return asConfigError(provider.FromRecord(m.spec(), dir, rec))
}

func asConfigError(model llm.Model, set record.ModelSettings, err error) (llm.Model, record.ModelSettings, error) {
	if ce, ok := errors.AsType[*provider.ConfigError](err); ok {
		err = &run.ConfigError{Msg: ce.Msg}
	}
	return model, set, err
}

var (
	firstNonEmpty = provider.FirstNonEmpty
	loggedModel   = provider.Logged
)
