package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/hostfs"
	"github.com/apodex/apodex/internal/workspace"
)

// Kinds of change.
const (
	Created  = "created"
	Modified = "modified"
	Deleted  = "deleted"
	Symlink  = "symlink" // a link created or retargeted
)

// Change is one path the agent changed relative to the baseline.
type Change struct {
	Path   string `json:"path"` // slash-separated, relative to the workspace root
	Kind   string `json:"kind"`
	Hash   string `json:"hash,omitempty"`   // the agent's content hash (Created, Modified)
	Target string `json:"target,omitempty"` // the link target (Symlink)
}

// state is the change's result in the form of a baseline entry.
func (c Change) state() string {
	switch c.Kind {
	case Deleted:
		return ""
	case Symlink:
		return linkPrefix + c.Target
	}
	return c.Hash
}

// Changes lists what the agent changed, sorted by path. For an overlay it
// reads only the upper directory; for a copy it hashes the whole view.
func (w *Worktree) Changes() ([]Change, error) {
	if w.closed {
		return nil, ErrClosed
	}
	if w.Kind == Copy {
		cur, err := scan(w.Dir, nil)
		if err != nil {
			return nil, err
		}
		return diff(w.baseline, cur, nil), nil
	}
	return w.overlayChanges()
}

// overlayChanges reads the upper directory: a file or link there is the
// agent's version; a whiteout deletes the lower path and all below it; an
// opaque directory, or a file or link where a directory was, hides everything
// the lower directory had below it.
func (w *Worktree) overlayChanges() ([]Change, error) {
	// The baseline's paths are sorted only if something hides a lower
	// directory: a merge of a few files costs a few lookups.
	var keys []string
	deleted := make(map[string]bool)
	hideBelow := func(rel string) {
		if keys == nil {
			keys = w.baseline.sortedKeys()
		}
		for i := sort.SearchStrings(keys, rel+"/"); i < len(keys) && strings.HasPrefix(keys[i], rel+"/"); i++ {
			deleted[keys[i]] = true
		}
	}
	// wasDir: a file or link in upper hides a lower directory only where
	// the shared directory has one.
	wasDir := func(rel string) bool {
		fi, err := os.Lstat(filepath.Join(w.shared, filepath.FromSlash(rel)))
		return err == nil && fi.IsDir()
	}
	hideSelf := func(rel string) {
		if _, ok := w.baseline.get(rel); ok {
			deleted[rel] = true
		}
	}
	cur := make(map[string]string)
	upper, err := os.OpenRoot(w.upper)
	if err != nil {
		return nil, err
	}
	defer upper.Close()
	err = filepath.WalkDir(w.upper, func(host string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if host == w.upper {
			return nil
		}
		rel := filepath.ToSlash(host[len(w.upper)+1:])
		switch t := d.Type(); {
		case t.IsDir():
			hideSelf(rel)
			if isOpaque(host) {
				hideBelow(rel)
			}
		case t.IsRegular():
			h, _, err := workspace.HashIn(upper, rel) // the agent may swap links in meanwhile
			if err != nil {
				return err
			}
			cur[rel] = h
			if wasDir(rel) {
				hideBelow(rel)
			}
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			cur[rel] = linkPrefix + target
			if wasDir(rel) {
				hideBelow(rel)
			}
		case t&fs.ModeCharDevice != 0:
			if fi, err := d.Info(); err == nil && isWhiteout(fi) {
				hideSelf(rel)
				hideBelow(rel)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return diff(w.baseline, cur, deleted), nil
}

// diff compares a baseline with the current files and links. If deleted is
// nil, a baseline path missing from cur is deleted; otherwise only the paths
// in deleted are, unless cur has them.
func diff(base *baseline, cur map[string]string, deleted map[string]bool) []Change {
	var out []Change
	for p, s := range cur {
		old, had := base.get(p)
		switch {
		case old == s:
		case strings.HasPrefix(s, linkPrefix):
			out = append(out, Change{Path: p, Kind: Symlink, Target: s[len(linkPrefix):]})
		case had:
			out = append(out, Change{Path: p, Kind: Modified, Hash: s})
		default:
			out = append(out, Change{Path: p, Kind: Created, Hash: s})
		}
	}
	gone := func(p string) {
		if _, still := cur[p]; !still {
			out = append(out, Change{Path: p, Kind: Deleted})
		}
	}
	if deleted == nil {
		base.each(gone)
	} else {
		for p := range deleted {
			if _, had := base.get(p); had {
				gone(p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// racySlack: a hash taken less than this after the file's last change is not
// trusted next time, because a rewrite within the same clock tick could leave
// the stat unchanged.
const racySlack = 50 * time.Millisecond

type statKey struct {
	size, mtime, ctime int64
	ino                uint64
}

type cached struct {
	key  statKey
	hash string
	at   int64 // ns
}

// statCache remembers hashes of one directory's files between scans, so a
// Create on an unchanged workspace costs one lstat per file.
type statCache struct {
	mu sync.Mutex
	m  map[string]cached
}

// scan records the regular files and symlinks under dir (path → hash or
// linkPrefix+target). workspace.Snapshot is not used because it skips links,
// which a merge must see. Files that vanish or cannot be read are left out:
// a merge then treats them as changed by someone else, which is the safe side.
func scan(dir string, c *statCache) (map[string]string, error) {
	var old map[string]cached
	if c != nil {
		c.mu.Lock()
		old = c.m
		c.mu.Unlock()
	}
	seen := make(map[string]cached, len(old))
	out := make(map[string]string, len(old))
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	err = filepath.WalkDir(dir, func(host string, d fs.DirEntry, err error) error {
		if err != nil {
			if host == dir {
				return err
			}
			return nil
		}
		if host == dir {
			return nil
		}
		rel := filepath.ToSlash(host[len(dir)+1:])
		switch t := d.Type(); {
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			k := statKey{fi.Size(), fi.ModTime().UnixNano(), changeTime(fi), inode(fi)}
			e, ok := old[rel]
			if !ok || e.key != k || k.ctime >= e.at-int64(racySlack) || k.mtime >= e.at-int64(racySlack) {
				h, _, err := workspace.HashIn(root, rel)
				if err != nil {
					return nil
				}
				e = cached{key: k, hash: h, at: time.Now().UnixNano()}
			}
			seen[rel], out[rel] = e, e.hash
		case t&fs.ModeSymlink != 0:
			if target, err := os.Readlink(host); err == nil {
				out[rel] = linkPrefix + target
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c != nil {
		c.mu.Lock()
		c.m = seen
		c.mu.Unlock()
	}
	return out, nil
}

// copyTree copies the directories, regular files (with mode and mtime) and
// symlinks of src to dst, which must not exist, and returns the baseline of
// what it copied. Other files are left out. It reads through an os.Root of
// src and writes through hostfs in dst, so a link swapped into src while it
// copies neither leads the reads out of src nor the writes out of dst.
func copyTree(src, dst string) (map[string]string, error) {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return nil, err
	}
	sr, err := os.OpenRoot(src)
	if err != nil {
		return nil, err
	}
	defer sr.Close()
	dr, err := hostfs.Open(dst)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	base := make(map[string]string)
	type dirMode struct {
		rel  string
		mode fs.FileMode
	}
	var dirs []dirMode
	buf := make([]byte, 64<<10)
	err = fs.WalkDir(sr.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch t := d.Type(); {
		case t.IsDir():
			dirs = append(dirs, dirMode{rel, fi.Mode().Perm()})
			if rel == "." {
				return nil
			}
			return dr.Root().Mkdir(rel, 0o700) // writable while we fill it
		case t.IsRegular():
			h, err := copyFile(sr, dr, rel, fi, buf)
			base[rel] = h
			return err
		case t&fs.ModeSymlink != 0:
			target, err := sr.Readlink(rel)
			if err != nil {
				return err
			}
			base[rel] = linkPrefix + target
			return dr.Symlink(target, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := dr.Root().Chmod(dirs[i].rel, dirs[i].mode); err != nil {
			return nil, err
		}
	}
	return base, nil
}

// copyFile copies one regular file and returns the hash of what it copied.
func copyFile(sr *os.Root, dr *hostfs.Dir, rel string, fi fs.FileInfo, buf []byte) (string, error) {
	in, err := sr.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is no longer a regular file", rel)
	}
	out, err := dr.Root().OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.CopyBuffer(struct{ io.Writer }{out}, io.TeeReader(in, h), buf) // hide ReadFrom so buf is used
	if err == nil {
		err = out.Chmod(fi.Mode().Perm()) // the umask applied at creation
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dr.Root().Chtimes(rel, fi.ModTime(), fi.ModTime())
	}
	return workspace.HashPrefix + hex.EncodeToString(h.Sum(nil)), err
}
