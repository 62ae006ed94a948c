// Package runfiles reads the files of a run directory's planes as the run
// left them, whatever way they are kept.
//
// A run's inputs/ and outputs/ hold their files. Its workspace/ holds its
// /workspace whole, except after a rollout of a stored world, whose
// workspace/ holds only what the rollout changed or created: the file
// workspace.base.json (Base) then names the world whose stored workspace
// (<home>/worlds/<id>/workspace, beside the run's <home>/runs/<id>) holds
// the rest, and the paths of it the rollout removed. Finishing a rollout
// is so proportional to what it changed, not to the world's size.
//
// Guarantees:
//   - OpenFile and ReadFile answer for a plane path ("workspace/a/b.py")
//     what the rollout's /workspace held at its end: a changed or created
//     file from the run, an untouched one from the stored world, a removed
//     one (or one below a removed or emptied directory, or below a path the
//     rollout replaced by a file) not at all. No symbolic link is followed
//     in either place (hostfs.OpenFile).
//   - The base is found from the world id alone, which must be a world id
//     (w- and 12 hex); a Base names no path, so an edited base file cannot
//     point a reader anywhere but a stored world's workspace of that home.
//   - Materialize writes the whole terminal tree into a new directory: hard
//     links (or copies) of the run's files over the world's.
//   - A run without a base file reads as before: workspace/ is the whole
//     tree.
package runfiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/hostfs"
)

// BaseFile is the base's file in the run directory.
const BaseFile = "workspace.base.json"

// Base says that a run's workspace/ holds only a rollout's changes over a
// stored world's workspace.
type Base struct {
	// World is the stored world's id; its workspace is BaseDir.
	World string `json:"world"`
	// Removed are the world's paths (slash-separated, relative to its
	// workspace) the rollout removed, or replaced by something not kept
	// (a symbolic link): each hides the world's entry and all below it.
	Removed []string `json:"removed,omitempty"`
	// Opaque are the directories the rollout removed and made again: the
	// world's entries below each are hidden; workspace/ holds what is
	// there now.
	Opaque []string `json:"opaque,omitempty"`

	hidden map[string]bool // Removed and, for what is below, Opaque
	below  map[string]bool // Opaque
}

// ErrBaseMissing: a file the run did not change is read from its world,
// which is not stored (any more) where the run's home keeps worlds.
var ErrBaseMissing = errors.New("the run's world is not stored")

var worldID = regexp.MustCompile(`^w-[0-9a-f]{12}$`)

// BaseDir is where a stored world's workspace is for a run in runDir: the
// world store of the run's home (world.NewStore: <home>/worlds/<id>) for a
// run at <home>/runs/<run-id>.
func BaseDir(runDir, world string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(runDir)), "worlds", world, "workspace")
}

// Dir is b's world's stored workspace, for the run in runDir.
func (b *Base) Dir(runDir string) string { return BaseDir(runDir, b.World) }

// check refuses a base that is not plainly one (a tampered or damaged
// file) and indexes it.
func (b *Base) check() error {
	if !worldID.MatchString(b.World) {
		return fmt.Errorf("runfiles: %s names no world id (%q)", BaseFile, b.World)
	}
	b.hidden, b.below = map[string]bool{}, map[string]bool{}
	for _, list := range [][]string{b.Removed, b.Opaque} {
		for _, p := range list {
			if p == "" || p != path.Clean(p) || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
				return fmt.Errorf("runfiles: %s holds the path %q, which is not a clean relative path", BaseFile, p)
			}
		}
	}
	for _, p := range b.Removed {
		b.hidden[p] = true
	}
	for _, p := range b.Opaque {
		b.below[p] = true
	}
	return nil
}

// Hides reports whether the world's entry at rel (relative to its
// workspace) is not part of the run's terminal workspace: removed, or
// below a removed or emptied directory.
func (b *Base) Hides(rel string) bool {
	if b.hidden[rel] {
		return true
	}
	for i := len(rel) - 1; i > 0; i-- {
		if rel[i] == '/' && (b.hidden[rel[:i]] || b.below[rel[:i]]) {
			return true
		}
	}
	return false
}

// ReadBase reads runDir's base: nil (and no error) when the run's
// workspace/ is whole.
func ReadBase(runDir string) (*Base, error) {
	data, err := hostfs.ReadFile(runDir, BaseFile, 64<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runfiles: %w", err)
	}
	var b Base
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("runfiles: %s: %w", BaseFile, err)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// ReadBaseOf is ReadBase for a run whose record names world (its
// run_started settings; "" for none): a base naming another world is an
// error, the run directory having been edited.
func ReadBaseOf(runDir, world string) (*Base, error) {
	b, err := ReadBase(runDir)
	if err == nil && b != nil && b.World != world {
		return nil, fmt.Errorf("%s names world %s, but the record's world is %q: the run directory was edited", BaseFile, b.World, world)
	}
	return b, err
}

// WriteBase writes b as runDir's base, durably and whole (a temporary
// file renamed into place).
func WriteBase(runDir string, b Base) error {
	slices.Sort(b.Removed)
	slices.Sort(b.Opaque)
	if err := b.check(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(runDir, BaseFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, filepath.Join(runDir, BaseFile))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// OpenFile opens the regular file at the plane path name ("outputs/x",
// "workspace/a/b.py") of the run in runDir, as the run left it (see the
// package's guarantees). Errors are hostfs.OpenFile's (fs.ErrNotExist,
// hostfs.ErrLink, hostfs.ErrNotRegular), and ErrBaseMissing.
func OpenFile(runDir, name string) (*os.File, error) {
	f, err := hostfs.OpenFile(runDir, name)
	notDir := errors.Is(err, syscall.ENOTDIR) // a parent is a file: nothing is below it
	if notDir {
		err = &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	rel, inWorkspace := strings.CutPrefix(name, "workspace/")
	if !inWorkspace || !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	b, berr := ReadBase(runDir)
	switch {
	case berr != nil:
		return nil, berr
	case b == nil:
		return nil, err
	case notDir || b.Hides(rel):
		// A parent is a file the rollout wrote in place of the world's
		// directory, or the world's entry was removed.
		return nil, err
	}
	dir := b.Dir(runDir)
	f, err = hostfs.OpenFile(dir, rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("%s is not in the run's changes and %w: world %s is not under %s (the run keeps only what it changed; store the world there again)",
				name, ErrBaseMissing, b.World, filepath.Dir(filepath.Dir(dir)))
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return f, err
}

// ReadFile reads the regular file at the plane path name as OpenFile opens
// it. With max > 0 a larger file is refused rather than read.
func ReadFile(runDir, name string, max int64) ([]byte, error) {
	f, err := OpenFile(runDir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return hostfs.ReadOpened(f, name, max)
}

// Materialize writes the run's terminal /workspace into dst, which must
// not exist or be an empty directory: every regular file as a hard link
// to the run's or the world's file (copy: as a copy, writable; also where
// a link cannot be made), directories made. It returns the number of
// files written. Symbolic links and other special files are not kept, as
// a rollout's end does not keep them.
func Materialize(runDir, dst string, copy bool) (int, error) {
	b, err := ReadBase(runDir)
	if err != nil {
		return 0, err
	}
	if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return 0, err
	}
	if ents, err := os.ReadDir(dst); err != nil {
		return 0, err
	} else if len(ents) > 0 {
		return 0, fmt.Errorf("runfiles: %s is not empty", dst)
	}
	n, err := Fill(dst, filepath.Join(runDir, "workspace"), nil, copy)
	if err != nil || b == nil {
		return n, err
	}
	base := b.Dir(runDir)
	if _, err := os.Stat(base); err != nil {
		return n, fmt.Errorf("runfiles: %w: world %s is not under %s", ErrBaseMissing, b.World, filepath.Dir(filepath.Dir(base)))
	}
	m, err := Fill(dst, base, b, copy)
	return n + m, err
}

// Fill links (copy: copies) into dst the regular files of the tree src
// that dst does not show already: none b hides, none at a path dst holds,
// none below a path dst holds as a file. It returns the number of files
// written. Rollout.Finish fills a terminal workspace from a world stored
// elsewhere with it; Materialize, from the run and then its world.
func Fill(dst, src string, b *Base, copy bool) (int, error) {
	if b == nil {
		b = &Base{World: "w-000000000000"}
	}
	if err := b.check(); err != nil {
		return 0, err
	}
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		slash := filepath.ToSlash(rel)
		to := filepath.Join(dst, rel)
		if b.Hides(slash) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(to)
		switch {
		case err == nil && d.IsDir() && fi.IsDir():
			return nil // merged: its entries are looked at one by one
		case err == nil || errors.Is(err, syscall.ENOTDIR):
			// dst shows something else here, or a file above: it wins.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return err
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		n++
		if !copy && os.Link(p, to) == nil {
			return nil
		}
		return hostfs.CopyNewExec(p, to)
	})
	return n, err
}
