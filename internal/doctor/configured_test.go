package doctor

import (
	"context"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/provider"
)

func TestConfiguredEndpointWithoutARequest(t *testing.T) {
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "APODEX_MODEL"} {
		t.Setenv(k, "")
	}
	for _, c := range []struct {
		spec         provider.Spec
		status, name string
	}{
		{provider.Spec{}, Skip, "model endpoint"},
		{provider.Spec{Provider: "scripted"}, Skip, "scripted"},
		{provider.Spec{Provider: "openai"}, Fail, "configuration"},
	} {
		cs := ConfiguredEndpoint(context.Background(), c.spec)
		if len(cs) != 1 || cs[0].Status != c.status || cs[0].Name != c.name {
			t.Errorf("ConfiguredEndpoint(%+v) = %+v; want one %s check %q", c.spec, cs, c.status, c.name)
		}
	}
}

func TestRenderPlain(t *testing.T) {
	var b strings.Builder
	Render(&b, []Check{{Group: "sandbox", Name: "bwrap", Status: Fail, Detail: "missing", Fix: "install bubblewrap"}}, false)
	if want := "FAIL  sandbox  bwrap: missing\n      fix: install bubblewrap\n"; b.String() != want {
		t.Errorf("Render = %q; want %q", b.String(), want)
	}
}
