package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestProfileSource(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, c := range []struct {
		flag      bool
		name, env string
		want      string
	}{
		{true, "fast", "", "flag --profile"},
		{false, "", "", "none selected"},
		{false, "fast", "fast", "env APODEX_PROFILE"},
		{false, "fast", "", `file (profile = "fast")`},
	} {
		if got := ProfileSource(c.flag, c.name, env(c.env)); got != c.want {
			t.Errorf("ProfileSource(%v, %q, env %q) = %q; want %q", c.flag, c.name, c.env, got, c.want)
		}
	}
}

func TestRenderMarksEmptyAndAbsent(t *testing.T) {
	var b strings.Builder
	missing := filepath.Join(t.TempDir(), "config.toml")
	Render(&b, []Value{{Key: "model", Value: "", Source: "default"}}, []string{missing})
	out := b.String()
	if !strings.Contains(out, "model    -      default\n") || !strings.Contains(out, "  "+missing+" (absent)\n") {
		t.Errorf("Render:\n%s", out)
	}
}
