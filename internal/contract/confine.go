package contract

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// OutsideFlag is the flag of apodex run that lets a task name host paths
// outside its directory (Options.AllowOutside).
const OutsideFlag = "--allow-outside-task"

// Options shape LoadWith and ParseWith.
type Options struct {
	// AllowOutside lets the task's host paths (inputs, corpus, a verify
	// clause's files, a deliverable's json_schema and the files its $ref
	// names) lie outside the task file's directory, or lead out of it
	// through a symbolic link. Without it both are refused: a task file
	// from elsewhere must not copy /etc into a run, where the agent reads it.
	AllowOutside bool
}

// confine refuses host, the resolution of the task path spec given for
// key, unless it lies inside the task file's directory, symbolic links
// resolved, or the options allow it. It reports whether host may be used.
func (p *parser) confine(n *yaml.Node, key, spec, host string) bool {
	if p.allowOutside {
		return true
	}
	if !inside(host, p.base) {
		p.fail(n, "%s: %s is outside the task file's directory %s; move it under that directory, or pass %s to apodex run to use host paths elsewhere", key, spec, p.base, OutsideFlag)
		return false
	}
	real, err := filepath.EvalSymlinks(host)
	if errors.Is(err, fs.ErrNotExist) {
		return true // the caller says what is missing
	}
	base, berr := filepath.EvalSymlinks(p.base)
	if err != nil || berr != nil {
		p.fail(n, "%s: %s cannot be resolved (%v); name a path under the task file's directory %s", key, spec, errors.Join(err, berr), p.base)
		return false
	}
	if !inside(real, base) {
		p.fail(n, "%s: %s leads out of the task file's directory %s through a symbolic link (to %s); symbolic links are not followed out of it: copy the files in, or pass %s to apodex run to use host paths elsewhere", key, spec, p.base, real, OutsideFlag)
		return false
	}
	return true
}

// inside reports whether p is dir or below it, by name only.
func inside(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// schemaLoader loads the local files a JSON schema's $ref names, refusing
// those outside dir (symbolic links resolved) unless allow.
type schemaLoader struct {
	dir   string
	allow bool
}

func (l schemaLoader) Load(url string) (any, error) {
	path, err := jsonschema.FileLoader{}.ToFile(url)
	if err != nil {
		return nil, err
	}
	if !l.allow {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, err
		}
		base, err := filepath.EvalSymlinks(l.dir)
		if err != nil {
			return nil, err
		}
		if !inside(path, l.dir) || !inside(real, base) {
			return nil, fmt.Errorf("$ref %s is outside the task file's directory %s (symbolic links resolved); keep schemas under it, or pass %s to apodex run", path, l.dir, OutsideFlag)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return jsonschema.UnmarshalJSON(f)
}
