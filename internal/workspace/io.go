package workspace

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Open opens a resolved path for reading. It goes through os.Root, so a link
// swapped in since Resolve cannot lead outside the plane, and it opens FIFOs
// without blocking (callers should refuse anything not regular).
func (w *FS) Open(p Path) (*os.File, error) {
	root, err := os.OpenRoot(w.Root(p.Plane))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.OpenFile(relName(p.Rel), os.O_RDONLY|nonBlock, 0)
}

// OpenRoot opens the os.Root of a plane, for walking it safely.
func (w *FS) OpenRoot(plane string) (*os.Root, error) {
	return os.OpenRoot(w.Root(plane))
}

// WriteFile replaces the content of a path from ResolveWrite, creating its
// parent directories. It asks the OutputsWrite hook again, now with the size.
// A new file gets mode 0644; an existing one keeps its permission bits. The
// name must still be a regular file with a single link (or absent); the new
// content goes to a temporary file that is renamed over it, so the old
// inode, and any name a link swapped in since would point to, is never
// written.
func (w *FS) WriteFile(p Path, data []byte) error {
	if p.Plane == Inputs || p.Rel == "" {
		return refuse("cannot write %s: resolve it with ResolveWrite first", p.PlanePath)
	}
	if err := w.allowOutputs(p, int64(len(data))); err != nil {
		return err
	}
	root, err := os.OpenRoot(w.Root(p.Plane))
	if err != nil {
		return err
	}
	defer root.Close()
	if dir := path.Dir(p.Rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cannot create the directories of %s: %w", p.PlanePath, unwrapPathError(err))
		}
	}
	perm := fs.FileMode(0o644)
	fi, err := root.Lstat(p.Rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("cannot write %s: %w", p.PlanePath, unwrapPathError(err))
	case !fi.Mode().IsRegular() || linkCount(fi) > 1:
		return refuse("cannot write %s: it is no longer a regular file with a single link", p.PlanePath)
	default:
		perm = fi.Mode().Perm()
	}
	if _, err := ReplaceFile(root, p.Rel, bytes.NewReader(data), perm); err != nil {
		return fmt.Errorf("cannot write %s: %w", p.PlanePath, unwrapPathError(err))
	}
	return nil
}

// ReplaceFile copies src into a new temporary file next to rel (inside
// root, whose directories must exist) and renames it over rel, whatever rel
// was: the rename replaces a link itself, never its target. It returns the
// bytes written; on error nothing is left behind and rel is untouched.
func ReplaceFile(root *os.Root, rel string, src io.Reader, perm fs.FileMode) (int64, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+tempMark+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, src)
	if err == nil {
		err = f.Chmod(perm) // the umask applied at creation
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		root.Remove(tmp)
		return 0, err
	}
	return n, nil
}

func relName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// HashFile returns the content hash ("sha256:<hex>") and size of a regular
// host file.
func HashFile(host string) (string, int64, error) {
	f, err := os.OpenFile(host, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashOpen(f)
}

// hashOpen hashes an open file, refusing anything but a regular file.
func hashOpen(f *os.File) (string, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("workspace: %s is not a regular file", f.Name())
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return HashPrefix + hex.EncodeToString(h.Sum(nil)), n, nil
}

// HashBytes is HashFile for content in memory.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return HashPrefix + hex.EncodeToString(sum[:])
}

// HashPrefix starts every content hash.
const HashPrefix = "sha256:"

// tempMark names the runtime's own temporary files (atomic replacement), which
// snapshots ignore: they exist only while a write is in flight.
const tempMark = ".apodex-"

func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMark)
}

// RemoveTemps deletes the runtime's own temporary files under root: the
// leftovers of atomic writes cut off by a crash. They were never renamed
// into place, so nothing that counts is lost.
func RemoveTemps(root string) (removed []string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && isTemp(d.Name()) {
			if os.Remove(p) == nil {
				removed = append(removed, p)
			}
		}
		return nil
	})
	return removed
}
