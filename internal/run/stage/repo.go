package stage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/repo"
)

// runBlobs are a run's blobs as repo.Blobs: a writer while it runs, a
// reader after.
type runBlobs struct {
	dir string
	log *record.Log
}

func (b runBlobs) Put(data []byte) (string, error) {
	ref, err := b.log.PutBlob(data)
	return strings.TrimPrefix(ref, "sha256:"), err
}

func (b runBlobs) Get(sha string) ([]byte, error) { return record.ReadBlob(b.dir, "sha256:"+sha) }

// RepoBlobs reads the file contents of run dir's baseline.
func RepoBlobs(dir string) repo.Blobs { return runBlobs{dir: dir} }

// RepoOptions is the host tree a run works on (Config.Repo, RepoAll,
// RepoFrom and Home of package run).
type RepoOptions struct {
	Repo string // the host tree
	All  bool   // ignored files and .git too
	From string // in a replay: the original run, whose baseline is staged
	Home string // the runs home, which the tree must not contain
}

// Repo copies the host tree cfg.Repo into the workspace ws and keeps its
// baseline (or, in a replay, the baseline of run cfg.From) as blobs.
func Repo(cfg RepoOptions, log *record.Log, ws string) (*record.RepoSettings, error) {
	put := runBlobs{dir: filepath.Dir(ws), log: log}
	var b *repo.Baseline
	if cfg.From != "" {
		orig, err := RepoBaseline(cfg.From)
		if err != nil {
			return nil, err
		}
		src := RepoBlobs(cfg.From)
		for _, e := range orig.Files {
			data, err := src.Get(e.SHA256)
			if err != nil {
				return nil, err
			}
			if _, err := put.Put(data); err != nil {
				return nil, err
			}
		}
		if err := repo.Restore(orig.Files, ws, put); err != nil {
			return nil, err
		}
		b = orig
	} else {
		dir, err := filepath.Abs(cfg.Repo)
		if err != nil {
			return nil, &ConfigError{fmt.Sprintf("bad --repo %q: %v", cfg.Repo, err)}
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, &ConfigError{fmt.Sprintf("--repo %s is not a directory: pass the root of the tree to work on", cfg.Repo)}
		}
		if h, err := filepath.Abs(cfg.Home); err == nil {
			if d, h := RealPath(dir), RealPath(h); h == d || strings.HasPrefix(h, d+string(filepath.Separator)) {
				return nil, &ConfigError{fmt.Sprintf("--repo %s contains the runs home %s: pass --home outside the tree", cfg.Repo, cfg.Home)}
			}
		}
		paths, git, err := repo.List(dir, cfg.All)
		if err != nil {
			return nil, err
		}
		files, err := repo.Stage(dir, paths, ws, put)
		if err != nil {
			return nil, err
		}
		b = &repo.Baseline{Dir: dir, Git: git, All: cfg.All, Files: files}
	}
	data, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	ref, err := log.PutBlob(data)
	if err != nil {
		return nil, err
	}
	return &record.RepoSettings{Dir: b.Dir, All: b.All, Git: b.Git, Baseline: ref, Files: len(b.Files)}, nil
}

// RepoBaseline reads the baseline of a run on a host tree; a run without
// one is an error that says so.
func RepoBaseline(dir string) (*repo.Baseline, error) {
	first, err := record.First(dir)
	if err != nil {
		return nil, err
	}
	rs, ok := record.As[record.RunStarted](first)
	if !ok {
		return nil, errors.New("run: the record does not start with a readable run_started")
	}
	var r *record.RepoSettings
	if rs.Settings != nil {
		r = rs.Settings.Repo
	}
	if r == nil {
		return nil, &ConfigError{fmt.Sprintf("run %s was not started on a tree (apodex run --repo DIR); its files are in %s", filepath.Base(dir), filepath.Join(dir, "outputs"))}
	}
	data, err := record.ReadBlob(dir, r.Baseline)
	if err != nil {
		return nil, err
	}
	var b repo.Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("run: the baseline of %s: %w", filepath.Base(dir), err)
	}
	return &b, nil
}
