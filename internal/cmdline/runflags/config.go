package runflags

import (
	"os"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/config"
)

// ApplyConfig fills every flag of fs that the command line did not give
// from the configuration (env > profile > file defaults; see package
// config), through the flag's own parser, so a bad value in a file gets the
// same message as on the command line, plus where it came from.
func ApplyConfig(fs *cmdline.FlagSet, home, profile string) (config.Resolved, error) {
	given := fs.Given()
	flags := map[string]string{}
	for _, k := range config.Keys {
		if fl := fs.Lookup(config.FlagName(k)); fl != nil && given[fl.Name] {
			flags[k] = fl.Value.String()
		}
	}
	var files []config.File
	for _, p := range config.Paths(cmdline.HomeDir(home), os.Getenv) {
		f, err := config.Load(p)
		if err != nil {
			return config.Resolved{}, cmdline.Usagef("%v", err)
		}
		files = append(files, f)
	}
	r, err := config.Resolve(config.Input{Files: files, Profile: profile, Flags: flags, Getenv: os.Getenv})
	if err != nil {
		return r, cmdline.Usagef("%v", err)
	}
	for _, k := range config.Keys {
		v, ok := r.Values[k]
		fl := fs.Lookup(config.FlagName(k))
		if !ok || fl == nil || given[fl.Name] {
			continue
		}
		if err := fs.Set(fl.Name, v.Value); err != nil {
			return r, cmdline.Usagef("%s = %q (from %s): %v", k, v.Value, v.Source, err)
		}
	}
	return r, nil
}
