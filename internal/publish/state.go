package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/apodex/apodex/internal/workspace"
)

type kind int

const (
	kindAbsent kind = iota
	kindFile
	kindDir
	kindLink
	kindOther // FIFO, socket, device, or unreadable
)

// state is what is at one path of a tree, found without following links.
type state struct {
	kind   kind
	where  string // the plane path it is about: the path, or the parent in the way
	parent bool   // where is a parent of the path that is not a directory
	hash   string // kindFile
	size   int64  // kindFile
	links  uint64 // kindFile
	perm   fs.FileMode
	target string // kindLink
	typ    fs.FileMode
	err    error       // kindOther: why it could not be read
	fi     fs.FileInfo // the lstat, when there was one
}

// same reports whether two states show the same thing at the same place.
func (s state) same(t state) bool {
	return s.kind == t.kind && s.parent == t.parent && s.where == t.where && s.hash == t.hash && s.target == t.target && s.typ == t.typ
}

// deliverable reports whether s is a regular file with a single link.
func (s state) deliverable() bool { return s.kind == kindFile && !s.parent && s.links == 1 }

// what says what is at s.where, for the model: "is a symbolic link (to x)".
func (s state) what() string {
	switch s.kind {
	case kindAbsent:
		return "does not exist"
	case kindDir:
		return "is a directory"
	case kindLink:
		return fmt.Sprintf("is a symbolic link (to %s)", s.target)
	case kindOther:
		if s.err != nil {
			return fmt.Sprintf("cannot be read (%v)", s.err)
		}
		return fmt.Sprintf("is not a regular file (%s)", s.typ)
	}
	if s.parent {
		return "is a file, not a directory"
	}
	if s.links > 1 {
		return fmt.Sprintf("has %d hard links", s.links)
	}
	return fmt.Sprintf("is a regular file (%d bytes)", s.size)
}

// look finds what is at rel (slash-separated, relative to the root of the
// /outputs tree held by root). Every parent must be a real directory;
// otherwise the state is about the first parent in the way. Regular files
// are hashed.
func look(root *os.Root, rel string) state {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		pre := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(pre)
		if errors.Is(err, fs.ErrNotExist) {
			return state{kind: kindAbsent, where: "/outputs/" + rel}
		}
		if err != nil || !fi.IsDir() {
			s := describe(root, pre, fi, err)
			s.parent = true
			return s
		}
	}
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return state{kind: kindAbsent, where: "/outputs/" + rel}
	}
	return describe(root, rel, fi, err)
}

// describe builds the state of rel from its lstat.
func describe(root *os.Root, rel string, fi fs.FileInfo, err error) state {
	s := state{where: "/outputs/" + rel, fi: fi}
	switch {
	case err != nil:
		s.kind, s.err = kindOther, unwrap(err)
	case fi.IsDir():
		s.kind = kindDir
	case fi.Mode()&fs.ModeSymlink != 0:
		s.kind = kindLink
		s.target, _ = root.Readlink(rel)
	case !fi.Mode().IsRegular():
		s.kind, s.typ = kindOther, fi.Mode().Type()
	default:
		s.kind, s.links, s.perm = kindFile, linkCount(fi), fi.Mode().Perm()
		s.hash, s.size, s.err = hashAt(root, rel, fi)
		if s.err != nil {
			s.kind = kindOther
		}
	}
	return s
}

// openAt opens the regular file rel that lstat described as fi, and
// refuses anything else found there by the time it is open.
func openAt(root *os.Root, rel string, fi fs.FileInfo) (*os.File, error) {
	f, err := root.OpenFile(rel, openRead, 0)
	if err != nil {
		return nil, unwrap(err)
	}
	if got, err := f.Stat(); err != nil || !got.Mode().IsRegular() || !os.SameFile(got, fi) {
		f.Close()
		return nil, errChanged
	}
	return f, nil
}

// errChanged is a file replaced between its lstat and its open.
var errChanged = errors.New("it changed while being read")

// hashAt returns the content hash ("sha256:<hex>") and size of rel.
func hashAt(root *os.Root, rel string, fi fs.FileInfo) (string, int64, error) {
	f, err := openAt(root, rel, fi)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, unwrap(err)
	}
	return workspace.HashPrefix + hex.EncodeToString(h.Sum(nil)), n, nil
}

// unwrap drops the host file name from a *fs.PathError.
func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
