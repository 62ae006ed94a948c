package run

import (
	"errors"

	"github.com/apodex/apodex/internal/repo"
	"github.com/apodex/apodex/internal/run/stage"
)

// configErr is err with a *stage.ConfigError (a problem with what the user
// asked for, found while staging the run) made a *ConfigError.
func configErr(err error) error {
	var ce *stage.ConfigError
	if errors.As(err, &ce) {
		return &ConfigError{ce.Msg}
	}
	return err
}

// RepoBlobs reads the file contents of run dir's baseline.
func RepoBlobs(dir string) repo.Blobs { return stage.RepoBlobs(dir) }

// RepoBaseline reads the baseline of a run on a host tree; a run without
// one is a *ConfigError that says so.
func RepoBaseline(dir string) (*repo.Baseline, error) {
	b, err := stage.RepoBaseline(dir)
	return b, configErr(err)
}
