package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, FileName)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Precedence: flags > env > profile > file defaults; a later file beats an
// earlier one at the same layer; each value names its source.
func TestPrecedence(t *testing.T) {
	xdg, home := t.TempDir(), t.TempDir()
	px := write(t, xdg, "model = \"xdg-model\"\nmax_turns = 7\nsandbox = \"none\"\n")
	ph := write(t, home, `
profile = "local"
max_turns = 9
[profiles.local]
provider = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "qwen"
context_window = 32768
timeout = "15m"
[profiles.other]
model = "other"
`)
	var files []File
	for _, p := range []string{px, ph} {
		f, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	r, err := Resolve(Input{Files: files, Flags: map[string]string{"timeout": "5m"}, Getenv: env(map[string]string{"APODEX_SANDBOX": "bwrap"})})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"model":          {"qwen", "profile local (" + ph + ")"},
		"base_url":       {"http://127.0.0.1:8000/v1", "profile local (" + ph + ")"},
		"max_turns":      {"9", "file " + ph},
		"context_window": {"32768", "profile local (" + ph + ")"},
		"timeout":        {"5m", "flag --timeout"},
		"sandbox":        {"bwrap", "env APODEX_SANDBOX"},
	}
	for k, w := range want {
		if v := r.Values[k]; v.Value != w[0] || v.Source != w[1] {
			t.Errorf("%s = %q from %q, want %q from %q", k, v.Value, v.Source, w[0], w[1])
		}
	}
	// $APODEX_PROFILE beats the file's choice, --profile beats both.
	r, _ = Resolve(Input{Files: files, Getenv: env(map[string]string{"APODEX_PROFILE": "other"})})
	if r.Profile != "other" || r.Values["model"].Value != "other" {
		t.Errorf("APODEX_PROFILE: %+v", r)
	}
	r, _ = Resolve(Input{Files: files, Profile: "local", Getenv: env(map[string]string{"APODEX_PROFILE": "other", "APODEX_MODEL": "env-model"})})
	if r.Profile != "local" || r.Values["model"].Value != "env-model" {
		t.Errorf("--profile with APODEX_MODEL: %+v", r.Values["model"])
	}
	_, err = Resolve(Input{Files: files, Profile: "nope", Getenv: env(nil)})
	if !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), "local, other") {
		t.Errorf("unknown profile: %v", err)
	}
}

// The provider's own environment variables: OPENAI_BASE_URL implies openai
// and supplies the base URL, unless a higher layer chose otherwise.
func TestProviderEnv(t *testing.T) {
	r, _ := Resolve(Input{Getenv: env(map[string]string{"OPENAI_BASE_URL": "http://x/v1"})})
	if r.Values["provider"].Value != "openai" || r.Values["base_url"].Value != "http://x/v1" {
		t.Errorf("%+v", r.Values)
	}
	r, _ = Resolve(Input{Flags: map[string]string{"provider": "anthropic"}, Getenv: env(map[string]string{"OPENAI_BASE_URL": "http://x/v1"})})
	if _, ok := r.Values["base_url"]; ok {
		t.Errorf("OPENAI_BASE_URL applied to anthropic: %+v", r.Values)
	}
}

// Bad files: an error names the file and the key; a missing file is empty.
func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"modle = \"x\"\n":                       "unknown key modle",
		"[profiles.a]\nmax_trns = 3\n":          "profiles.a.max_trns",
		"model = [1, 2]\n":                      "must be a string",
		"model = \"x\n":                         "not valid TOML",
		"profile = 3\n":                         "profile must be a string",
		"[profiles]\nlocal = \"not a table\"\n": "must be a table",
	} {
		p := write(t, dir, text)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
	f, err := Load(filepath.Join(dir, "absent.toml"))
	if err != nil || len(f.Defaults) != 0 {
		t.Errorf("missing file: %+v %v", f, err)
	}
}

// Config files are outside input: Load never panics, and what it accepts
// holds only known keys.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{"model = \"x\"\n", "[profiles.a]\nmax_turns = 3\n", "profile = \"a\"\n[profiles.a]\n", "= =", "[[x]]\n"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := write(t, dir, text)
		file, err := Load(p)
		if err != nil {
			return
		}
		for k := range file.Defaults {
			if !slices.Contains(Keys, k) {
				t.Errorf("accepted unknown key %q", k)
			}
		}
		for _, vals := range file.Profiles {
			for k := range vals {
				if !slices.Contains(Keys, k) {
					t.Errorf("accepted unknown profile key %q", k)
				}
			}
		}
	})
}
