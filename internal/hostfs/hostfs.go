// Package hostfs is the one way the runtime writes files on the host
// (SPEC R-SBX-5): resume's replayed deltas, worktree merges, publish
// commits and verifier scratch all go through a Dir. It is also how readers
// of a run directory (serve, log, show, export, replay) open a file whose
// name came from the record or from an agent's planes: OpenFile, ReadFile.
//
// Guarantees:
//   - a Dir is a directory opened as an os.Root: nothing it creates,
//     writes, renames or removes lies outside that directory, whatever the
//     names given and whatever links appear while it works (the kernel
//     resolves every name relative to the directory's descriptor and
//     os.Root refuses a link that would leave it);
//   - a name must be relative, slash-separated and clean: an absolute
//     name, a ".." or "." element, an empty element, a backslash or a NUL
//     byte is refused before anything is touched (ErrName);
//   - a name whose existing parent directories include a symbolic link is
//     refused (ErrLink), even a link that stays inside the directory: the
//     runtime never writes through a link an agent may have planted;
//   - Replace writes a new temporary file next to the name and renames it
//     over the name, so a reader or a killed process never sees a file
//     half-written, the old inode is never written, and a link at the
//     final name is replaced, never followed; with a wanted hash the
//     rename happens only if the bytes written have it;
//   - on any error nothing is left behind: the temporary file is removed;
//   - OpenFile and ReadFile follow no symbolic link below the directory,
//     not even one that stays inside it: each element is opened with
//     O_NOFOLLOW relative to its parent's descriptor, and a link is refused
//     as "<path> is a symbolic link; not followed" (a *LinkError, ErrLink);
//     only regular files are opened.
//
// Temporary names start with "." and contain TempMark; IsTemp tells them.
package hostfs

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
	"strings"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrName: the name is not a clean relative path.
	ErrName = errors.New("hostfs: bad name")
	// ErrLink: a parent of the name is a symbolic link.
	ErrLink = errors.New("hostfs: path goes through a symbolic link")
	// ErrChanged: the bytes written do not have the wanted hash.
	ErrChanged = errors.New("hostfs: content changed while being copied")
)

// HashPrefix starts every content hash ("sha256:<hex>").
const HashPrefix = "sha256:"

// TempMark names the runtime's own temporary files.
const TempMark = ".apodex-"

// IsTemp reports whether a base name is one of the runtime's temporary files.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, TempMark)
}

// Dir is a host directory the runtime writes into. It is safe for
// concurrent use; Close it when done.
type Dir struct {
	root *os.Root
}

// Open opens dir, which must exist.
func Open(dir string) (*Dir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Dir{root: r}, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// Root is the underlying os.Root, for reading.
func (d *Dir) Root() *os.Root { return d.root }

// CheckName refuses a name that is not a clean relative slash path.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrName)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: %q contains a NUL byte", ErrName, name)
	case strings.ContainsRune(name, '\\'):
		return fmt.Errorf("%w: %q contains a backslash", ErrName, name)
	case path.IsAbs(name):
		return fmt.Errorf("%w: %q is absolute; names are relative to the directory", ErrName, name)
	}
	for _, el := range strings.Split(name, "/") {
		switch el {
		case "..":
			return fmt.Errorf("%w: %q climbs out with \"..\"", ErrName, name)
		case "", ".":
			return fmt.Errorf("%w: %q is not a clean path (empty or \".\" element)", ErrName, name)
		}
	}
	return nil
}

// checkParents refuses name unless each of its existing parent directories
// is a directory and not a link.
func (d *Dir) checkParents(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	els := strings.Split(name, "/")
	for i := 1; i < len(els); i++ {
		p := strings.Join(els[:i], "/")
		fi, err := d.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // nothing below exists either
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %s is a symbolic link", ErrLink, p)
		case !fi.IsDir():
			return fmt.Errorf("hostfs: %s is not a directory", p)
		}
	}
	return nil
}

// MkdirAll creates name and its missing parents with perm. No element may
// be a link.
func (d *Dir) MkdirAll(name string, perm fs.FileMode) error {
	if err := d.checkParents(name + "/x"); err != nil {
		return err
	}
	return d.root.MkdirAll(name, perm)
}

// Lstat describes name without following a final link; its parents must not
// be links.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := d.checkParents(name); err != nil {
		return nil, err
	}
	return d.root.Lstat(name)
}

// WriteFile creates the parents of name and replaces name with data.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode) error {
	if err := d.mkParents(name); err != nil {
		return err
	}
	_, _, err := d.Replace(name, bytes.NewReader(data), perm, "")
	return err
}

func (d *Dir) mkParents(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if dir := path.Dir(name); dir != "." {
		return d.MkdirAll(dir, 0o755)
	}
	return nil
}

// Replace copies src into a new temporary file next to name (whose parent
// directories must exist) and renames it over name, whatever name was. It
// returns the bytes written and their hash. With want set, the rename
// happens only if the hash is want (else ErrChanged).
func (d *Dir) Replace(name string, src io.Reader, perm fs.FileMode, want string) (int64, string, error) {
	if err := d.checkParents(name); err != nil {
		return 0, "", err
	}
	tmp := tempName(name)
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err := io.Copy(f, io.TeeReader(src, h))
	if err == nil {
		err = f.Chmod(perm) // the umask applied at creation
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	sum := HashPrefix + hex.EncodeToString(h.Sum(nil))
	if err == nil && want != "" && sum != want {
		err = ErrChanged
	}
	if err == nil {
		err = d.root.Rename(tmp, name)
	}
	if err != nil {
		d.root.Remove(tmp)
		return 0, "", err
	}
	return n, sum, nil
}

// Symlink makes name a symbolic link to target, replacing whatever name
// was (atomically, through a temporary link and a rename). The link is only
// created, never followed; callers decide which targets are acceptable.
func (d *Dir) Symlink(target, name string) error {
	if err := d.checkParents(name); err != nil {
		return err
	}
	tmp := tempName(name)
	if err := d.root.Symlink(target, tmp); err != nil {
		return err
	}
	if err := d.root.Rename(tmp, name); err != nil {
		d.root.Remove(tmp)
		return err
	}
	return nil
}

// Remove removes name (a file, a link itself, or an empty directory). A
// missing name is not an error.
func (d *Dir) Remove(name string) error {
	if err := d.checkParents(name); err != nil {
		return err
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveAll removes name and everything under it, without following links.
func (d *Dir) RemoveAll(name string) error {
	if err := d.checkParents(name); err != nil {
		return err
	}
	return d.root.RemoveAll(name)
}

func tempName(name string) string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return path.Join(path.Dir(name), "."+path.Base(name)+TempMark+hex.EncodeToString(rnd[:]))
}

// CopyNew copies the host file src to dst, which must not exist yet (mode
// 0644): how the runtime fills a directory it has just created (a run's
// inputs, a world being stored).
func CopyNew(src, dst string) error { return copyNew(src, dst, false) }

// CopyNewExec is CopyNew keeping whether src is executable (0755 then).
func CopyNewExec(src, dst string) error { return copyNew(src, dst, true) }

func copyNew(src, dst string, keepExec bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	mode := os.FileMode(0o644)
	if keepExec {
		if st, err := in.Stat(); err != nil {
			return err
		} else if st.Mode()&0o111 != 0 {
			mode = 0o755
		}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
