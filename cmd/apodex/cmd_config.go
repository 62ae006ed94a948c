package main

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/apodex/apodex/internal/config"
)

// applyConfig fills every flag of fs that the command line did not give
// from the configuration (env > profile > file defaults; see package
// config), through the flag's own parser, so a bad value in a file gets the
// same message as on the command line, plus where it came from.
func applyConfig(fs *flagSet, home, profile string) (config.Resolved, error) {
	given := fs.given()
	flags := map[string]string{}
	for _, k := range config.Keys {
		if fl := fs.Lookup(config.FlagName(k)); fl != nil && given[fl.Name] {
			flags[k] = fl.Value.String()
		}
	}
	var files []config.File
	for _, p := range config.Paths(homeDir(home), os.Getenv) {
		f, err := config.Load(p)
		if err != nil {
			return config.Resolved{}, usagef("%v", err)
		}
		files = append(files, f)
	}
	r, err := config.Resolve(config.Input{Files: files, Profile: profile, Flags: flags, Getenv: os.Getenv})
	if err != nil {
		return r, usagef("%v", err)
	}
	for _, k := range config.Keys {
		v, ok := r.Values[k]
		fl := fs.Lookup(config.FlagName(k))
		if !ok || fl == nil || given[fl.Name] {
			continue
		}
		if err := fs.Set(fl.Name, v.Value); err != nil {
			return r, usagef("%s = %q (from %s): %v", k, v.Value, v.Source, err)
		}
	}
	return r, nil
}

// cmdConfig is `apodex config show`: the settings a run would get here, and
// where each came from.
func cmdConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("config", "show [flags]   (the effective settings of `apodex run` with these flags, and the source of each)", stdout, stderr)
	var f runFlags
	f.register(fs)                        // the run's own flags and defaults, so `config show --model x` shows what `run --model x` gets
	home, jsonOut := &f.home, &f.out.json // --json: a JSON array of {key, value, source}
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "show" {
		return usagef("use `apodex config show [--profile NAME]`")
	}
	given := fs.given()
	r, err := applyConfig(fs, *home, f.model.profile)
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
	out = append(out, config.Value{Key: "home", Value: homeDir(*home), Source: homeSrc})
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
	servers, err := mcpServers(*home, r.Profile, *f.mcpConfig)
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
		writeJSON(stdout, out)
		return nil
	}
	config.Render(stdout, out, config.Paths(homeDir(*home), os.Getenv))
	return nil
}
