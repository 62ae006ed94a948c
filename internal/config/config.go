// Package config reads apodex's TOML configuration files and resolves each
// setting from its layers, remembering where every value came from.
//
// Guarantees:
//   - precedence, highest first: command-line flags, environment variables,
//     the selected profile, the files' top-level defaults, built-in defaults;
//     a higher layer replaces a lower one's value whole;
//   - files are read in the order given (later ones win at the same layer):
//     $XDG_CONFIG_HOME/apodex/config.toml, then $APODEX_HOME/config.toml;
//     a missing file is no error, a malformed one or an unknown key is, and
//     the error names the file and the key;
//   - the profile is chosen by --profile, else $APODEX_PROFILE, else the
//     files' top-level `profile` key; naming a profile no file defines is an
//     error that lists the defined ones;
//   - API keys are never read from files (only from the environment);
//   - MCP servers ([mcp_servers.NAME], top level or in a profile, and a
//     project's .mcp.json) are resolved by name, a higher layer's entry
//     replacing a lower one's whole (mcp.go); their secrets are read
//     only when a server starts.
package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
)

// FileName is the configuration file's name in each directory.
const FileName = "config.toml"

// Keys are the settings a file or profile may set; each is also the flag
// of the same name with '-' for '_' (base_url is --base-url).
var Keys = []string{
	"provider", "base_url", "model", "script", "context_window",
	"max_turns", "max_tool_calls", "max_tokens", "timeout", "soft_deadline",
	"sandbox", "network", "retries", "mode", "scratch_quota",
	"nats", // the NATS URL of `eval --nats` and `worker --nats`
}

// Env maps a key to the environment variables that set it, first found wins.
// base_url's provider-specific variables are added by Resolve.
var Env = map[string][]string{
	"provider": {"APODEX_PROVIDER"},
	"model":    {"APODEX_MODEL"},
	"base_url": {"APODEX_BASE_URL"},
	"sandbox":  {"APODEX_SANDBOX"},
	"nats":     {"APODEX_NATS_URL"},
}

// ErrUnknownProfile: the profile asked for is in no file.
var ErrUnknownProfile = errors.New("config: unknown profile")

// File is one parsed configuration file.
type File struct {
	Path     string
	Defaults map[string]string            // top-level keys
	Profiles map[string]map[string]string // [profiles.NAME]
	Profile  string                       // top-level `profile`: the default profile
	// MCP are the [mcp_servers.NAME] tables, ProfileMCP a profile's
	// (mcp.go).
	MCP        map[string]MCPServer
	ProfileMCP map[string]map[string]MCPServer
}

// Load reads the file at path; a missing file is an empty File.
func Load(path string) (File, error) {
	f := File{Path: path, Defaults: map[string]string{}, Profiles: map[string]map[string]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return f, nil // a home that is not a directory is the home check's to report
	}
	if err != nil {
		return f, fmt.Errorf("config: read %s: %w", path, err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return f, fmt.Errorf("config: %s is not valid TOML: %v", path, err)
	}
	for k, v := range raw {
		switch k {
		case "profile":
			s, ok := v.(string)
			if !ok {
				return f, fmt.Errorf("config: %s: profile must be a string (the name of a [profiles.NAME] table)", path)
			}
			f.Profile = s
		case "mcp_servers": // read by loadMCP
		case "profiles":
			tables, ok := v.(map[string]any)
			if !ok {
				return f, fmt.Errorf("config: %s: profiles must be tables, e.g. [profiles.local]", path)
			}
			for name, t := range tables {
				m, ok := t.(map[string]any)
				if !ok {
					return f, fmt.Errorf("config: %s: profiles.%s must be a table", path, name)
				}
				delete(m, "mcp_servers") // read by loadMCP
				vals, err := values(path, "profiles."+name+".", m)
				if err != nil {
					return f, err
				}
				f.Profiles[name] = vals
			}
		default:
			vals, err := values(path, "", map[string]any{k: v})
			if err != nil {
				return f, err
			}
			maps.Copy(f.Defaults, vals)
		}
	}
	return f, loadMCP(path, data, &f)
}

func values(path, prefix string, m map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range m {
		if !slices.Contains(Keys, k) {
			return nil, fmt.Errorf("config: %s: unknown key %s%s; known keys: %s", path, prefix, k, strings.Join(Keys, ", "))
		}
		switch v.(type) {
		case string, int64, float64, bool:
			out[k] = fmt.Sprint(v)
		default:
			return nil, fmt.Errorf("config: %s: %s%s must be a string, number or boolean", path, prefix, k)
		}
	}
	return out, nil
}

// Paths are the configuration files, lowest precedence first.
func Paths(home string, getenv func(string) string) []string {
	var out []string
	xdg := getenv("XDG_CONFIG_HOME")
	if xdg == "" {
		if h := getenv("HOME"); h != "" {
			xdg = filepath.Join(h, ".config")
		}
	}
	if xdg != "" {
		out = append(out, filepath.Join(xdg, "apodex", FileName))
	}
	return append(out, filepath.Join(home, FileName))
}

// Value is one resolved setting.
type Value struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"` // "flag --model", "env APODEX_MODEL", "profile local (path)", "file path", "default"
}

// Input is what Resolve layers.
type Input struct {
	Files   []File
	Profile string            // --profile, "" for none
	Flags   map[string]string // keys given on the command line
	Getenv  func(string) string
}

// Resolved is the effective configuration.
type Resolved struct {
	Profile string           // the profile applied, "" for none
	Values  map[string]Value // keys that some layer set
}

// Resolve applies the layers (see the package doc).
func Resolve(in Input) (Resolved, error) {
	getenv := in.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	r := Resolved{Values: map[string]Value{}}
	set := func(k, v, src string) { r.Values[k] = Value{Key: k, Value: v, Source: src} }
	profiles := map[string]File{}
	for _, f := range in.Files {
		for k, v := range f.Defaults {
			set(k, v, "file "+f.Path)
		}
		if f.Profile != "" {
			r.Profile = f.Profile
		}
		for name := range f.Profiles {
			profiles[name] = f
		}
	}
	if p := getenv("APODEX_PROFILE"); p != "" {
		r.Profile = p
	}
	if in.Profile != "" {
		r.Profile = in.Profile
	}
	if r.Profile != "" {
		found := false
		for _, f := range in.Files {
			if vals, ok := f.Profiles[r.Profile]; ok {
				found = true
				for k, v := range vals {
					set(k, v, fmt.Sprintf("profile %s (%s)", r.Profile, f.Path))
				}
			}
		}
		if !found {
			names := slices.Sorted(maps.Keys(profiles))
			where := "no profiles are defined"
			if len(names) > 0 {
				where = "defined: " + strings.Join(names, ", ")
			}
			return r, fmt.Errorf("%w %q: %s; add [profiles.%s] to %s", ErrUnknownProfile, r.Profile, where, r.Profile, lastPath(in.Files))
		}
	}
	for _, k := range sortedKeys(Env) {
		for _, name := range Env[k] {
			if v := getenv(name); v != "" {
				set(k, v, "env "+name)
				break
			}
		}
	}
	// The hosted providers' own variables: the base URL follows the provider.
	provider := r.Values["provider"].Value
	if fv, ok := in.Flags["provider"]; ok {
		provider = fv
	}
	if _, ok := r.Values["base_url"]; !ok || !strings.HasPrefix(r.Values["base_url"].Source, "env") {
		for _, p := range []struct{ provider, env string }{{"openai", "OPENAI_BASE_URL"}, {"anthropic", "ANTHROPIC_BASE_URL"}} {
			if v := getenv(p.env); v != "" && provider == p.provider {
				set("base_url", v, "env "+p.env)
			}
		}
	}
	if _, ok := r.Values["provider"]; !ok && provider == "" {
		switch {
		case getenv("OPENAI_BASE_URL") != "":
			set("provider", "openai", "env OPENAI_BASE_URL (implies openai)")
			set("base_url", getenv("OPENAI_BASE_URL"), "env OPENAI_BASE_URL")
		case getenv("OPENAI_API_KEY") != "":
			set("provider", "openai", "env OPENAI_API_KEY (implies openai)")
		case getenv("ANTHROPIC_API_KEY") != "" || getenv("ANTHROPIC_BASE_URL") != "":
			set("provider", "anthropic", "env ANTHROPIC_API_KEY (implies anthropic)")
			if v := getenv("ANTHROPIC_BASE_URL"); v != "" {
				set("base_url", v, "env ANTHROPIC_BASE_URL")
			}
		}
	}
	for k, v := range in.Flags {
		set(k, v, "flag --"+FlagName(k))
	}
	return r, nil
}

// FlagName is the flag that sets key.
func FlagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// Key is the key a flag sets.
func Key(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

func lastPath(files []File) string {
	if len(files) == 0 {
		return FileName
	}
	return files[len(files)-1].Path
}

func sortedKeys[V any](m map[string]V) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}
