package runflags

import (
	"errors"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/provider"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// Model is the model group: the flags that choose and reach a model
// (R-UI-3), and the config profile that may set them.
type Model struct {
	Provider string
	Name     string
	BaseURL  string
	Script   string
	Profile  string
	NoStream bool
}

func (m *Model) Register(fs *cmdline.FlagSet) {
	fs.StringVar(&m.Provider, "provider", "", "model provider: openai (any OpenAI-compatible endpoint), anthropic or scripted;\ndefault: openai when OPENAI_BASE_URL or OPENAI_API_KEY is set, else anthropic when ANTHROPIC_API_KEY is set")
	fs.StringVar(&m.Name, "model", "", "model name (default: $APODEX_MODEL; required for a local OpenAI-compatible server; gpt-4o-mini on the hosted OpenAI API, claude-sonnet-4-5 on Anthropic's)")
	fs.StringVar(&m.BaseURL, "base-url", "", "endpoint base URL, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL or $ANTHROPIC_BASE_URL, else the hosted API)")
	fs.StringVar(&m.Script, "script", "", "JSON script for --provider scripted (see examples/)")
	fs.StringVar(&m.Profile, "profile", "", "settings profile from config.toml ([profiles.NAME]; default: $APODEX_PROFILE, else the file's profile key)")
	fs.BoolVar(&m.NoStream, "no-stream", false, "ask for whole replies instead of streaming (SSE)")
}

func (m *Model) Spec() provider.Spec {
	return provider.Spec{Provider: m.Provider, Model: m.Name, BaseURL: m.BaseURL, Script: m.Script, NoStream: m.NoStream}
}

// Build returns the model and what to record about it (provider.Build);
// what cannot work is a *run.ConfigError, a usage error.
func (m *Model) Build() (llm.Model, record.ModelSettings, error) {
	return asConfigError(provider.Build(m.Spec()))
}

// FromRecord rebuilds the model a run was started with, from its record;
// flags given on the command line override the recorded values.
func (m *Model) FromRecord(dir string, rec record.ModelSettings) (llm.Model, record.ModelSettings, error) {
	return asConfigError(provider.FromRecord(m.Spec(), dir, rec))
}

func asConfigError(model llm.Model, set record.ModelSettings, err error) (llm.Model, record.ModelSettings, error) {
	if ce, ok := errors.AsType[*provider.ConfigError](err); ok {
		err = &run.ConfigError{Msg: ce.Msg}
	}
	return model, set, err
}

var (
	firstNonEmpty = provider.FirstNonEmpty
	LoggedModel   = provider.Logged
)
