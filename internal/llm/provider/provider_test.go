package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

func TestBuildRefusesWhatCannotWork(t *testing.T) {
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "APODEX_MODEL"} {
		t.Setenv(k, "")
	}
	for _, c := range []struct {
		name string
		spec Spec
		hint string
	}{
		{"no provider", Spec{}, "--provider"},
		{"hosted openai without key", Spec{Provider: "openai"}, "OPENAI_API_KEY"},
		{"local server without model", Spec{Provider: "openai", BaseURL: "http://127.0.0.1:1/v1"}, "--model NAME"},
		{"hosted anthropic without key", Spec{Provider: "anthropic"}, "ANTHROPIC_API_KEY"},
		{"scripted without script", Spec{Provider: "scripted"}, "--script FILE"},
		{"unknown", Spec{Provider: "nope"}, "unknown provider"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Build(c.spec)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(ce.Msg, c.hint) {
				t.Fatalf("Build(%+v) = %v; want a ConfigError naming %q", c.spec, err, c.hint)
			}
		})
	}
}

func TestBuildNeverRecordsTheKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("OPENAI_BASE_URL", "")
	_, set, err := Build(Spec{Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	if set.Name != "gpt-4o-mini" || set.BaseURL != "https://api.openai.com/v1" || !set.Stream || strings.Contains(set.Provider+set.Name+set.BaseURL, "sk-") {
		t.Errorf("settings %+v", set)
	}
}

func TestFromRecordKeepsRecordedEndpoint(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	_, set, err := FromRecord(Spec{}, "", record.ModelSettings{Provider: "openai", Name: "m1", BaseURL: "http://127.0.0.1:9/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if set.Name != "m1" || set.BaseURL != "http://127.0.0.1:9/v1" || set.Stream {
		t.Errorf("settings %+v; want the recorded model, endpoint and no streaming", set)
	}
	_, set, err = FromRecord(Spec{Model: "m2"}, "", record.ModelSettings{Provider: "openai", Name: "m1", BaseURL: "http://127.0.0.1:9/v1", Stream: true})
	if err != nil || set.Name != "m2" || !set.Stream {
		t.Errorf("override: %+v, %v", set, err)
	}
}
