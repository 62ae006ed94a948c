package world

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/hostfs"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/world/filelist"
)

// ErrNotFound is returned for an id no stored world has.
var ErrNotFound = errors.New("world: not found")

// Store files kept beside a stored world's content (not hashed).
const (
	taskFile = ".task.yaml" // the contract part, loadable by contract.Load
	infoFile = ".world.json"
)

// Store is the immutable world store, <home>/worlds/.
type Store struct{ Dir string }

// NewStore is the store of the apodex home.
func NewStore(home string) *Store { return &Store{Dir: filepath.Join(home, "worlds")} }

// World is a stored world.
type World struct {
	ID       string             `json:"id"`
	Dir      string             `json:"dir"`
	Name     string             `json:"name"`
	Family   string             `json:"family"`
	Gen      Generator          `json:"generator"`
	Diff     map[string]float64 `json:"difficulty,omitempty"`
	Files    []File             `json:"files"`
	Bytes    int64              `json:"bytes"`
	Manifest *Manifest          `json:"-"`

	seals *sealOnce // see seal; shared by copies
}

// sealOnce holds a world's seal once read.
type sealOnce struct {
	once sync.Once
	rec  *sealRecord
}

// Contract loads the world's task from the store, so that the run's
// record names a task file `apodex verify` can reload.
func (w *World) Contract() (*contract.Contract, error) {
	return contract.Load(filepath.Join(w.Dir, taskFile))
}

// Inputs, Workspace, Corpus, Solution are host directories of the stored
// world; each may not exist.
func (w *World) Inputs() string    { return filepath.Join(w.Dir, "inputs") }
func (w *World) Workspace() string { return filepath.Join(w.Dir, "workspace") }
func (w *World) Corpus() string    { return filepath.Join(w.Dir, "corpus") }
func (w *World) Solution() string  { return filepath.Join(w.Dir, "solution") }

var idPattern = regexp.MustCompile(`^w-[0-9a-f]{12}$`)

// Build stores the world in src and returns it; fresh is false when the
// same content was stored before (nothing is written then).
func (s *Store) Build(src string) (w *World, fresh bool, err error) {
	m, err := Load(src)
	if err != nil {
		return nil, false, err
	}
	files, err := Files(src)
	if err != nil {
		return nil, false, err
	}
	id := ID(m.Canonical, files)
	dst := filepath.Join(s.Dir, id)
	if _, err := os.Stat(dst); err == nil {
		w, err := s.Get(id)
		return w, false, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("world: cannot create the store %s: %v; pass --home to a writable directory", s.Dir, err)
	}
	var b [4]byte
	rand.Read(b[:])
	tmp := filepath.Join(s.Dir, ".tmp-"+id+"-"+hex.EncodeToString(b[:]))
	defer os.RemoveAll(tmp)
	if err := copyWorld(src, tmp, files); err != nil {
		return nil, false, fmt.Errorf("world: store %s: %w", src, err)
	}
	w = &World{ID: id, Dir: dst, Name: m.Name, Family: m.Family, Gen: m.Generator, Diff: m.Difficulty, Files: files, Manifest: m, seals: &sealOnce{}}
	for _, f := range files {
		w.Bytes += f.Bytes
	}
	info, _ := json.MarshalIndent(w, "", "  ")
	for name, data := range map[string][]byte{taskFile: m.TaskYAML, infoFile: info, listFile: filelist.Encode(files), sealFile: nil} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o444); err != nil {
			return nil, false, fmt.Errorf("world: %w", err)
		}
	}
	if err := freeze(tmp); err != nil {
		return nil, false, fmt.Errorf("world: make %s read-only: %w", tmp, err)
	}
	if err := writeSeal(tmp, files); err != nil {
		return nil, false, fmt.Errorf("world: seal %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(dst); serr == nil { // another process stored it first
			w, err := s.Get(id)
			return w, false, err
		}
		return nil, false, fmt.Errorf("world: %w", err)
	}
	w, err = s.Get(id)
	return w, err == nil, err
}

// copyWorld copies world.yaml and the listed files of src into dst.
func copyWorld(src, dst string, files []File) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := hostfs.CopyNew(filepath.Join(src, ManifestFile), filepath.Join(dst, ManifestFile)); err != nil {
		return err
	}
	for _, d := range []string{"inputs", "workspace", "corpus", "tests", "solution"} {
		if isDir(filepath.Join(src, d)) {
			os.MkdirAll(filepath.Join(dst, d), 0o755)
		}
	}
	for _, f := range files {
		to := filepath.Join(dst, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := hostfs.CopyNew(filepath.Join(src, filepath.FromSlash(f.Path)), to); err != nil {
			return err
		}
	}
	return nil
}

// freeze removes every write bit under dir, deepest first, except on the
// directories of workspace/: an overlay shows the lower layer's modes, and
// a rollout's agent (without the capability to override them) must be able
// to create, rename and remove files in its workspace. Its files stay
// read-only: replacing one works, rewriting it in place needs a chmod
// first, which the overlay keeps to the rollout.
func freeze(dir string) error {
	var paths []string
	ws := filepath.Join(dir, "workspace")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !(d.IsDir() && (p == ws || strings.HasPrefix(p, ws+string(filepath.Separator)))) {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	for i := len(paths) - 1; i >= 0; i-- {
		fi, err := os.Lstat(paths[i])
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm() &^ 0o222
		if fi.IsDir() {
			mode |= 0o555
		} else {
			mode |= 0o444
		}
		if err := os.Chmod(paths[i], mode); err != nil {
			return err
		}
	}
	return nil
}

// Get finds a stored world by id, or by a unique prefix of one.
func (s *Store) Get(ref string) (*World, error) {
	id := ref
	if !idPattern.MatchString(ref) {
		ids, err := s.ids()
		if err != nil {
			return nil, err
		}
		var hits []string
		for _, i := range ids {
			if strings.HasPrefix(i, ref) {
				hits = append(hits, i)
			}
		}
		switch len(hits) {
		case 0:
			return nil, fmt.Errorf("%w: no world %q in %s; see `apodex worlds list`", ErrNotFound, ref, s.Dir)
		case 1:
			id = hits[0]
		default:
			return nil, fmt.Errorf("world: %q names %d worlds; give more of the id", ref, len(hits))
		}
	}
	dir := filepath.Join(s.Dir, id)
	w := &World{seals: &sealOnce{}}
	err := readStored(dir, w)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no world %s in %s; see `apodex worlds list`", ErrNotFound, id, s.Dir)
	} else if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("world: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("world: the stored world %s is damaged (%v): build it again from its source, or remove %s", id, err, dir)
	}
	w.Dir = dir
	if w.Manifest, err = Load(dir); err != nil {
		return nil, err
	}
	return w, nil
}

// Release drops w's file list and seal from memory (a 100,000-file
// world's 12 MB), for a caller that staged and finished w's only rollout
// and uses neither again: a released World keeps its id, directory and
// manifest, but is not to be staged, checked or listed again (get it
// from the store anew).
func (w *World) Release() {
	w.Files = nil
	if w.seals != nil {
		w.seals.once.Do(func() {}) // not read afterwards either
		w.seals.rec = nil
	}
}

// ErrChanged: a stored world's files no longer match its manifest.
var ErrChanged = errors.New("world: the stored world changed")

// Intact proves the stored world is the one stored: every file has the
// hash its manifest (.world.json) recorded when it was stored, and the
// whole hashes to its id. When the seal (seal.go) shows every directory and
// file as it was stored, that costs a stat of each and no read; otherwise
// every file is rehashed. A changed, missing or added file is an error
// naming it (the first in path order); a world whose list agrees but whose
// id does not names world.yaml or .world.json.
func (w *World) Intact() error { return w.intact(4) }

// intact is Intact with the seal's file stats on up to workers goroutines.
func (w *World) intact(workers int) error {
	if ok, _ := w.sealed(workers); ok && filepath.Base(w.Dir) == w.ID && ID(w.Manifest.Canonical, w.Files) == w.ID {
		return nil
	}
	return w.Rehash()
}

// Rehash is Intact without the seal: every file is read and hashed.
func (w *World) Rehash() error {
	files, err := Files(w.Dir)
	if err != nil {
		return fmt.Errorf("%w: %s cannot be rehashed: %v", ErrChanged, w.ID, err)
	}
	want := map[string]File{}
	for _, f := range w.Files {
		want[f.Path] = f
	}
	fix := fmt.Sprintf("build the world again from its source (apodex worlds build DIR), or remove %s", w.Dir)
	for _, f := range files {
		r, ok := want[f.Path]
		switch {
		case !ok:
			return fmt.Errorf("%w: world %s holds %s, which its manifest does not list: %s", ErrChanged, w.ID, f.Path, fix)
		case r.SHA256 != f.SHA256:
			return fmt.Errorf("%w: world %s: %s is not the file stored (sha256 %.12s… stored, %.12s… now): %s", ErrChanged, w.ID, f.Path, r.SHA256, f.SHA256, fix)
		}
		delete(want, f.Path)
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for p := range want {
			missing = append(missing, p)
		}
		sort.Strings(missing)
		return fmt.Errorf("%w: world %s: %s is missing: %s", ErrChanged, w.ID, missing[0], fix)
	}
	if id := ID(w.Manifest.Canonical, files); id != w.ID {
		return fmt.Errorf("%w: world %s: its files are as listed, but world.yaml or %s changed (the content hashes to %s): %s", ErrChanged, w.ID, infoFile, id, fix)
	}
	return nil
}

// List returns the stored worlds in id order.
func (s *Store) List() ([]*World, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	out := make([]*World, 0, len(ids))
	for _, id := range ids {
		w, err := s.Get(id)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func (s *Store) ids() ([]string, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if idPattern.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}
