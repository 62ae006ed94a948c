package main

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/runflags"
	"github.com/apodex/apodex/internal/config"
)

// cmdConfig is `apodex config show`: the settings a run would get here, and
// where each came from.
func cmdConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("config", "show [flags]   (the effective settings of `apodex run` with these flags, and the source of each)", stdout, stderr)
	var f runflags.Flags
	f.Register(fs)                        // the run's own flags and defaults, so `config show --model x` shows what `run --model x` gets
	home, jsonOut := &f.Home, &f.Out.JSON // --json: a JSON array of {key, value, source}
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "show" {
		return cmdline.Usagef("use `apodex config show [--profile NAME]`")
	}
	given := fs.Given()
	r, err := runflags.ApplyConfig(fs, *home, f.Model.Profile)
	if err != nil {
		return err
	}
	var out []config.Value
	homeSrc := "default"
	switch {
	case given["home"]:
		homeSrc = "flag --home"
	case os.Getenv("APODEX_HOME") != "":
		homeSrc = "env APODEX_HOME"
	}
	out = append(out, config.Value{Key: "home", Value: cmdline.HomeDir(*home), Source: homeSrc})
	prof := r.Profile
	if prof == "" {
		prof = "(none)"
	}
	out = append(out, config.Value{Key: "profile", Value: prof, Source: config.ProfileSource(given["profile"], r.Profile, os.Getenv)})
	for _, k := range config.Keys {
		fl := fs.Lookup(config.FlagName(k))
		if v, ok := r.Values[k]; ok {
			out = append(out, v)
		} else if fl != nil {
			out = append(out, config.Value{Key: k, Value: fl.DefValue, Source: "default"})
		}
	}
	servers, err := runflags.MCPServers(*home, r.Profile, *f.MCPConfig)
	if err != nil {
		return err
	}
	for _, n := range slices.Sorted(maps.Keys(servers)) {
		out = append(out, config.Value{Key: "mcp_servers." + n, Value: servers[n].Describe(), Source: servers[n].Source})
	}
	for _, env := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		state := "not set"
		if os.Getenv(env) != "" {
			state = "set (not shown)"
		}
		out = append(out, config.Value{Key: env, Value: state, Source: "env " + env + " (keys come only from the environment)"})
	}
	if *jsonOut {
		cmdline.WriteJSON(stdout, out)
		return nil
	}
	config.Render(stdout, out, config.Paths(cmdline.HomeDir(*home), os.Getenv))
	return nil
}
