package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/watch"
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
// parent directories, through hostfs (no link on the way is followed). It asks the OutputsWrite hook again, now with the size.
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
	d, err := hostfs.Open(w.Root(p.Plane))
	if err != nil {
		return err
	}
	defer d.Close()
	if dir := path.Dir(p.Rel); dir != "." {
		if err := d.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cannot create the directories of %s: %w", p.PlanePath, unwrapPathError(err))
		}
	}
	perm := fs.FileMode(0o644)
	fi, err := d.Lstat(p.Rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("cannot write %s: %w", p.PlanePath, unwrapPathError(err))
	case !fi.Mode().IsRegular() || w.sharedLinks(p, fi):
		return refuse("cannot write %s: it is no longer a regular file with a single link", p.PlanePath)
	default:
		perm = fi.Mode().Perm()
	}
	if _, _, err := d.Replace(p.Rel, bytes.NewReader(data), perm, ""); err != nil {
		return fmt.Errorf("cannot write %s: %w", p.PlanePath, unwrapPathError(err))
	}
	return nil
}

func relName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// HashFile returns the content hash ("sha256:<hex>") and size of a regular
// host file. A final symbolic link is not followed (an error); for a file
// under a directory an agent can write, use Hash or HashIn, which confine
// the parents too.
func HashFile(host string) (string, int64, error) {
	f, err := os.OpenFile(host, os.O_RDONLY|nonBlock|noFollow, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashOpen(f)
}

// Hash is HashIn for a resolved path: the file tools hash through it, so a
// link an agent's command swapped in since Resolve is never followed (W6).
func (w *FS) Hash(p Path) (string, int64, error) {
	root, err := os.OpenRoot(w.Root(p.Plane))
	if err != nil {
		return "", 0, err
	}
	defer root.Close()
	return HashIn(root, relName(p.Rel))
}

// ReadRegular reads the regular file at p, at most max bytes (more is an
// error), through os.Root: never a final link, never a file outside the
// plane, never a FIFO. The runtime reads what it records this way.
func (w *FS) ReadRegular(p Path, max int64) ([]byte, error) {
	root, err := os.OpenRoot(w.Root(p.Plane))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openRegular(root, relName(p.Rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("workspace: %s is larger than %d bytes", p.PlanePath, max)
	}
	return data, err
}

// HashIn returns the content hash and size of the regular file rel inside
// root. It never hashes anything outside root, refuses a final symbolic
// link (os.Root itself would follow one that stays inside), and refuses a
// file swapped between its lstat and its open.
func HashIn(root *os.Root, rel string) (string, int64, error) {
	f, err := openRegular(root, rel)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashOpen(f)
}

// openRegular opens rel in root if it is a regular file and not a link,
// and is still the file its lstat saw once open.
func openRegular(root *os.Root, rel string) (*os.File, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: errNotRegular}
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|nonBlock|noFollow, 0)
	if err != nil {
		return nil, err
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(fi, got) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: errSwapped}
	}
	return f, nil
}

var (
	errNotRegular = errors.New("not a regular file (a link, a directory or a special file)")
	errSwapped    = errors.New("the file was replaced while being read; try again")
)

// hashOpen hashes an open file, refusing anything but a regular file.
func hashOpen(f *os.File) (string, int64, error) {
	sum, n, err := sumOpen(f)
	if err != nil {
		return "", 0, err
	}
	return sum.String(), n, nil
}

// sumOpen is hashOpen's hash as a Sum.
func sumOpen(f *os.File) (Sum, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return Sum{}, 0, err
	}
	if !fi.Mode().IsRegular() {
		return Sum{}, 0, fmt.Errorf("workspace: %s is not a regular file", f.Name())
	}
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(h, onlyReader{f}, *buf)
	hashBufs.Put(buf)
	if err != nil {
		return Sum{}, 0, err
	}
	var sum Sum
	h.Sum(sum[:0])
	return sum, n, nil
}

// Sum is a content hash kept compact: the SHA-256 of the bytes. Its
// String is the hash as deltas and records carry it.
type Sum = watch.Sum

// hashBufs are hashOpen's read buffers: indexing a large workspace hashes
// every file once, and a buffer per file would make that garbage.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// onlyReader hides WriterTo, so io.CopyBuffer uses the pooled buffer.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// HashBytes is HashFile for content in memory.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return HashPrefix + hex.EncodeToString(sum[:])
}

// HashPrefix starts every content hash.
const HashPrefix = hostfs.HashPrefix

func isTemp(name string) bool { return hostfs.IsTemp(name) }

// RemoveTemps deletes the runtime's own temporary files under root: the
// leftovers of atomic writes cut off by a crash. They were never renamed
// into place, so nothing that counts is lost. It walks and removes through
// os.Root, so a link planted under root never leads it outside.
func RemoveTemps(root string) (removed []string) {
	return removeTemps(root, nil, true)
}

// RemoveTempsIn is RemoveTemps where set watches root: the temporary
// files are found in its tree (no walk of root) and removed through an
// os.Root as RemoveTemps does; without a tree of root it walks.
func RemoveTempsIn(set *watch.Set, root string) (removed []string) {
	var t *watch.Tree
	if set != nil {
		t = set.Lookup(root)
	}
	if t == nil {
		return RemoveTemps(root)
	}
	found := t.Matching(isTemp)
	sort.Strings(found)
	return removeTemps(root, found, false)
}

// removeTemps removes the temporary files found (slash paths under root),
// or, with walk, those a walk of root finds.
func removeTemps(root string, found []string, walk bool) (removed []string) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil
	}
	defer r.Close()
	if !walk {
		for _, p := range found {
			if fi, err := r.Lstat(p); err == nil && fi.Mode().IsRegular() && r.Remove(p) == nil {
				removed = append(removed, filepath.Join(root, filepath.FromSlash(p)))
			}
		}
		return removed
	}
	fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && isTemp(d.Name()) {
			if r.Remove(p) == nil {
				removed = append(removed, filepath.Join(root, filepath.FromSlash(p)))
			}
		}
		return nil
	})
	return removed
}

// sharedLinks reports whether the file at p (fi, from Lstat) has hard
// links a write must not split: more than one link, unless it lies only
// in /workspace's overlay lower layer (see Upper), where its links are not
// this workspace's.
func (w *FS) sharedLinks(p Path, fi fs.FileInfo) bool {
	if linkCount(fi) <= 1 {
		return false
	}
	if p.Plane != Workspace || w.Upper == "" || p.Rel == "" {
		return true
	}
	root, err := os.OpenRoot(w.Upper)
	if err != nil {
		return true
	}
	defer root.Close()
	_, err = root.Lstat(p.Rel)
	return !errors.Is(err, fs.ErrNotExist) // copied up (or unknown): its own links count
}
