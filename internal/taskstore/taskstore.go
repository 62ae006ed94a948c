// Package taskstore keeps a run's task inside the run: the normalized
// contract, the task file's text and every file the contract reads are
// stored as content-addressed blobs named in the contract event, and the
// contract in force is rebuilt from the run directory alone (the task file
// may be moved, edited or deleted after the start). A missing or altered
// blob is an error naming it; nothing is reloaded from the user's disk
// except for records that predate self-contained runs.
package taskstore

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/sandbox"
)

// taskDir is where a run keeps its own copy of the task: the files the
// contract reads, at their original absolute paths under taskDir/root.
const taskDir = "task"

// CorpusName is the corpus's directory under a run's /inputs.
const CorpusName = "corpus"

// Event is the recorded contract: what the user typed (u0) kept apart from
// the normalized objective and the acceptance clauses.
func Event(c *contract.Contract) record.Contract {
	raw, _ := c.MarshalJSON() // cannot fail: plain strings and numbers
	return record.Contract{U0: c.U0, Objective: c.Objective, File: c.File, Hash: c.Hash(), Contract: raw}
}

// Store stores the task file's text and every file the contract reads
// as blobs, named in ev: the run no longer needs the task file.
func Store(log *record.Log, c *contract.Contract, ev *record.Contract) error {
	if c.File == "" {
		return nil
	}
	text, err := os.ReadFile(c.File)
	if err != nil {
		return fmt.Errorf("run: keep the task file: %w", err)
	}
	if ev.TaskRef, err = log.PutBlob(text); err != nil {
		return err
	}
	put := func(p string, mode fs.FileMode) error {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ref, err := log.PutBlob(data)
		if err != nil {
			return err
		}
		ev.Files = append(ev.Files, record.TaskFile{Path: filepath.ToSlash(p), Mode: uint32(mode.Perm()), Ref: ref})
		return nil
	}
	for _, d := range c.Deliverables {
		if d.JSONSchema != "" {
			if err := put(d.JSONSchema, 0o644); err != nil {
				return fmt.Errorf("run: keep the JSON schema %s: %w", d.JSONSchema, err)
			}
		}
	}
	for _, cl := range c.Verify {
		if cl.Files == "" {
			continue
		}
		err := filepath.WalkDir(cl.Files, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return put(p, info.Mode())
		})
		if err != nil {
			return fmt.Errorf("run: keep the verifier files %s: %w", cl.Files, err)
		}
	}
	return nil
}

// Rebuild rebuilds the contract in force from the run directory
// alone: the task file's text and files from the blobs, the objective the
// user typed, then every revision. A run without a task file gets the
// objective it was given. A missing or corrupt blob is an error naming it.
func Rebuild(dir string, st *runstate.State) (*contract.Contract, error) {
	if len(st.Contracts) == 0 {
		if st.Started == nil {
			return nil, fmt.Errorf("run: the record has no run_started")
		}
		u0 := ""
		if st.Settings != nil {
			u0 = st.Settings.U0
		}
		if u0 == "" {
			u0 = st.Started.Objective
		}
		return contract.FromObjective(u0), nil
	}
	first := st.Contracts[0].Contract
	var c *contract.Contract
	switch {
	case first.File == "":
		c = Outline(first, cmp.Or(first.U0, first.Objective))
	case first.TaskRef == "": // a record of an older version: the task file itself
		var err error
		// Accepted when the run started (with or without --allow-outside-task).
		if c, err = contract.LoadWith(first.File, contract.Options{AllowOutside: true}); err != nil {
			return nil, fmt.Errorf("run: reload the task file %s (this run predates self-contained records): %w", first.File, err)
		}
	default:
		var err error
		if c, err = Materialize(dir, first); err != nil {
			return nil, err
		}
	}
	if first.U0 != "" {
		c.SetObjective(first.U0)
	}
	for _, rev := range st.Contracts[1:] {
		c = c.Revise(rev.Text)
	}
	if last := st.Contract(); (first.TaskRef != "" || first.File == "") && c.Hash() != last.Hash {
		return nil, fmt.Errorf("run: the contract rebuilt from the run (hash %s) is not the one recorded (hash %s); the task blobs under %s were altered", c.Hash(), last.Hash, filepath.Join(dir, record.BlobsDir))
	}
	return c, nil
}

// Outline is the contract ce records reduced to what a run without a task
// file can have: objective as its objective, and the deliverables ce names
// (their paths and kinds, from its canonical JSON) with its deliverables
// cap. A replay starts from the outline of the original's task (package
// replay), and a resume of that replay rebuilds the same contract from it.
func Outline(ce record.Contract, objective string) *contract.Contract {
	c := contract.FromObjective(objective)
	var w struct {
		Deliverables []struct{ Path, Kind string }
		Limits       struct{ Deliverables int }
	}
	if json.Unmarshal(ce.Contract, &w) != nil {
		return c
	}
	for _, d := range w.Deliverables {
		c.Deliverables = append(c.Deliverables, contract.Deliverable{Path: d.Path, Kind: d.Kind})
	}
	c.MaxDeliverables = w.Limits.Deliverables
	return c
}

// Materialize writes the task's files from their blobs under
// dir/task/root/<original path> (checking every blob's hash), links the
// inputs the contract names to the run's copy, and loads the task there.
func Materialize(dir string, ce record.Contract) (*contract.Contract, error) {
	root := filepath.Join(dir, taskDir, "root")
	if err := os.RemoveAll(filepath.Join(dir, taskDir)); err != nil {
		return nil, fmt.Errorf("run: rebuild the task: %w", err)
	}
	// Every write goes through the run's root-confined API: no path in the
	// record can put a file or a link outside dir/task/root.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("run: rebuild the task: %w", err)
	}
	td, err := hostfs.Open(root)
	if err != nil {
		return nil, fmt.Errorf("run: rebuild the task: %w", err)
	}
	defer td.Close()
	write := func(orig, ref string, mode fs.FileMode) error {
		data, err := readBlob(dir, ref)
		if err != nil {
			return err
		}
		name, err := relName(orig)
		if err != nil {
			return err
		}
		return td.WriteFile(name, data, mode)
	}
	if err := write(ce.File, ce.TaskRef, 0o644); err != nil {
		return nil, fmt.Errorf("run: rebuild the task file: %w", err)
	}
	// The copy keeps the files' modes (the contract's digest covers them)
	// and belongs to the uid sandboxed commands run as, so a verifier can
	// read a file the user kept 0600; the run directory itself is private.
	uid := sandbox.CommandUID()
	for _, f := range ce.Files {
		if err := write(f.Path, f.Ref, fs.FileMode(f.Mode)&0o777); err != nil {
			return nil, fmt.Errorf("run: rebuild the task's file %s: %w", f.Path, err)
		}
		if name, _ := relName(f.Path); uid != os.Geteuid() {
			if err := td.Root().Lchown(name, uid, sandbox.SandboxGID); err != nil {
				return nil, fmt.Errorf("run: give the task's file %s to the sandbox uid: %w", f.Path, err)
			}
		}
	}
	var wire struct {
		Inputs string `json:"inputs"`
		Corpus string `json:"corpus"`
	}
	if err := json.Unmarshal(ce.Contract, &wire); err == nil {
		// The task's inputs and corpus were copied into the run: its copy of
		// the task sees them there.
		for _, l := range []struct{ key, in string }{{wire.Inputs, "inputs"}, {wire.Corpus, filepath.Join("inputs", CorpusName)}} {
			if l.key == "" {
				continue
			}
			in := l.key
			if !filepath.IsAbs(in) {
				in = filepath.Join(filepath.Dir(ce.File), in)
			}
			name, err := relName(in)
			if err != nil {
				return nil, err
			}
			if _, err := td.Lstat(name); err == nil {
				continue // a path the task's own files already hold
			}
			if d := path.Dir(name); d != "." {
				if err := td.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
			}
			if err := td.Symlink(filepath.Join(dir, l.in), name); err != nil {
				return nil, fmt.Errorf("run: link the task's %s: %w", l.in, err)
			}
		}
	}
	target, _ := under(root, ce.File)
	// The kept task links to the run's copies, outside its root: it was
	// checked when the run started.
	c, err := contract.LoadWith(target, contract.Options{AllowOutside: true})
	if err != nil {
		return nil, fmt.Errorf("run: load the task kept in the run: %w", err)
	}
	c.File = ce.File
	return c, nil
}

// relName is an absolute original path as a name under the task root
// (slash-separated, clean); anything else is refused.
func relName(orig string) (string, error) {
	p, err := under(string(filepath.Separator), orig)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(strings.TrimPrefix(p, string(filepath.Separator))), nil
}

// under maps an absolute original path into root; anything else is refused.
func under(root, orig string) (string, error) {
	p := filepath.Clean(filepath.FromSlash(orig))
	if !filepath.IsAbs(p) || strings.Contains(orig, "..") {
		return "", fmt.Errorf("run: the record names the task path %q, which is not a clean absolute path; the record was altered", orig)
	}
	rel := strings.TrimPrefix(p, string(filepath.Separator))
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("run: the record names the task path %q outside the task", orig)
	}
	return filepath.Join(root, rel), nil
}

// readBlob reads a blob and checks its content against its name.
func readBlob(dir, ref string) ([]byte, error) {
	p, err := record.BlobPath(dir, ref)
	if err != nil {
		return nil, err
	}
	data, err := record.ReadBlob(dir, ref)
	if err != nil {
		return nil, fmt.Errorf("blob %s could not be read (%v); the run directory is incomplete: restore %s from a copy of the run", ref, err, p)
	}
	sum := sha256.Sum256(data)
	if !bytes.Equal([]byte(hex.EncodeToString(sum[:])), []byte(strings.TrimPrefix(ref, "sha256:"))) {
		return nil, fmt.Errorf("blob %s is corrupt (its content hashes to sha256:%x); restore %s from a copy of the run", ref, sum, p)
	}
	return data, nil
}
