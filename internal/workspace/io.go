package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
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
// parent directories. A new file gets mode 0644; an existing one keeps its
// mode. It re-checks, on the opened file, that it is a regular file with a
// single link.
func (w *FS) WriteFile(p Path, data []byte) error {
	if p.Plane == Inputs || p.Rel == "" {
		return refuse("cannot write %s: resolve it with ResolveWrite first", p.PlanePath)
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
	f, err := root.OpenFile(p.Rel, os.O_WRONLY|os.O_CREATE|nonBlock, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", p.PlanePath, unwrapPathError(err))
	}
	fi, err := f.Stat()
	if err == nil && (!fi.Mode().IsRegular() || linkCount(fi) > 1) {
		err = refuse("cannot write %s: it is no longer a regular file with a single link", p.PlanePath)
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
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
