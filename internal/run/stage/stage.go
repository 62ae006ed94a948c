// Package stage prepares what a run starts from, before its record has
// anything but run_started to say about it: the run directory, the user's
// inputs and corpus copied in read-only and hashed, a host tree (--repo)
// staged into /workspace with its baseline kept as blobs; and, at the end,
// the files the run produced.
//
// Guarantees:
//   - a problem with what the user asked for (a missing inputs directory,
//     one that contains the home, an unwritable home, a bad --repo) is a
//     *ConfigError, returned before the run does anything;
//   - inputs are regular files only: links and special files are never
//     followed, so inputs are a closed state a replay can rebuild;
//   - the host tree of --repo is read, never written.
package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
)

// ConfigError is a problem with what the user asked for; nothing was run.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// CheckInputs refuses a missing inputs directory, and one that contains the
// home (the copy would copy itself).
func CheckInputs(dir, home string) error {
	if dir == "" {
		return nil
	}
	if in, err := filepath.Abs(dir); err == nil {
		if h, err := filepath.Abs(home); err == nil {
			in, h = RealPath(in), RealPath(h)
			if h == in || strings.HasPrefix(h, in+string(filepath.Separator)) {
				return &ConfigError{fmt.Sprintf("inputs directory %s contains the runs home %s: pass --home outside the inputs", dir, home)}
			}
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return &ConfigError{fmt.Sprintf("inputs directory %s does not exist: pass --inputs an existing directory", dir)}
	}
	if !st.IsDir() {
		return &ConfigError{fmt.Sprintf("inputs %s is not a directory: pass --inputs a directory", dir)}
	}
	return nil
}

// MakeRunDir creates the run directory dir (private) and its planes.
func MakeRunDir(dir string) (*workspace.FS, error) {
	// The run directory is private (0700): what commands leave in the
	// planes is no one else's business on this machine.
	if err := os.MkdirAll(dir, 0o700); err == nil {
		_ = os.Chmod(dir, 0o700)
	}
	fs := &workspace.FS{
		Inputs:    filepath.Join(dir, "inputs"),
		Workspace: filepath.Join(dir, "workspace"),
		Outputs:   filepath.Join(dir, "outputs"),
		Watch:     watch.NewSet(), // the run's: its session closes it
	}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, &ConfigError{fmt.Sprintf("cannot create the run directory %s: %v; pass --home (or set APODEX_HOME) to a writable directory", dir, err)}
		}
	}
	return fs, nil
}

// RealPath resolves links in the longest existing prefix of p.
func RealPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(p)
	if dir == p || dir == "" {
		return p
	}
	return filepath.Join(RealPath(filepath.Clean(dir)), base)
}
