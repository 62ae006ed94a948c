package repo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ConflictError: files of the target tree changed since the baseline was
// taken; nothing was written.
type ConflictError struct{ Paths []string }

func (e *ConflictError) Error() string {
	return "changed in the target since the run started: " + strings.Join(e.Paths, ", ")
}

// Apply writes changes (read from the workspace ws) into the tree target,
// all or nothing. A file the run changed or deleted must still be as the
// baseline had it in target, and a file the run added must not be there
// (unless with the run's content); otherwise nothing is written and a
// *ConflictError names every such file. Every new content is written to a
// temporary file beside its target first; only when all are written are
// they renamed into place and the deletions made.
func Apply(changes []Change, ws, target string) (err error) {
	var conflicts []string
	for _, c := range changes {
		if c.Path == "" || strings.HasPrefix(c.Path, "/") || strings.Contains("/"+c.Path+"/", "/../") {
			return fmt.Errorf("repo: refusing the path %q", c.Path)
		}
		if err := plainPath(target, c.Path); err != nil {
			return err
		}
		cur, err := hashFile(filepath.Join(target, filepath.FromSlash(c.Path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if c.Base != nil && c.New != nil {
				conflicts = append(conflicts, c.Path+" (deleted)")
			}
		case err != nil:
			return fmt.Errorf("repo: %w", err)
		case c.Base == nil:
			if cur.SHA256 != c.New.SHA256 {
				conflicts = append(conflicts, c.Path+" (created)")
			}
		case cur.SHA256 != c.Base.SHA256:
			if c.New == nil || cur.SHA256 != c.New.SHA256 {
				conflicts = append(conflicts, c.Path)
			}
		}
	}
	if len(conflicts) > 0 {
		return &ConflictError{Paths: conflicts}
	}
	type staged struct{ tmp, dst string }
	var temps []staged
	var made []string // directories this apply created, deepest last
	defer func() {
		if err != nil {
			for _, s := range temps {
				os.Remove(s.tmp)
			}
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
		}
	}()
	for _, c := range changes {
		if c.New == nil {
			continue
		}
		dst := filepath.Join(target, filepath.FromSlash(c.Path))
		dirs, err := mkdirs(filepath.Dir(dst))
		made = append(made, dirs...)
		if err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		data, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(c.Path)))
		if err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		f, err := os.CreateTemp(filepath.Dir(dst), ".apodex-apply-*")
		if err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		temps = append(temps, staged{f.Name(), dst})
		_, err = f.Write(data)
		if err == nil {
			err = f.Chmod(fs.FileMode(c.New.Mode))
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("repo: write %s: %w", c.Path, err)
		}
	}
	for _, s := range temps {
		if err := os.Rename(s.tmp, s.dst); err != nil {
			return fmt.Errorf("repo: %w", err)
		}
	}
	for _, c := range changes {
		if c.New == nil {
			if err := os.Remove(filepath.Join(target, filepath.FromSlash(c.Path))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("repo: %w", err)
			}
		}
	}
	return nil
}

// mkdirs creates dir and its missing parents, returning those it created.
func mkdirs(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// plainPath refuses a path of the tree that leads through a symbolic link
// (it could lead out of the tree) or that names something other than a
// regular file: a rename onto it would fail half way.
func plainPath(target, rel string) error {
	p := target
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("repo: %w", err)
		}
		last := i == len(parts)-1
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("repo: refusing %s: %s is a symbolic link in the target", rel, p)
		case last && !st.Mode().IsRegular():
			return fmt.Errorf("repo: refusing %s: it is not a regular file in the target", rel)
		case !last && !st.IsDir():
			return fmt.Errorf("repo: refusing %s: %s is not a directory in the target", rel, p)
		}
	}
	return nil
}
