// Package etccopy makes the sandbox's /etc: a private copy of the host's
// allow-listed entries (Allow), bound read-only as one mount.
//
// Guarantees: a copy holds only what Allow admits, in a 0700 directory of
// this user; it is never older than etcRecheck behind the host; a copy in
// use (Acquire without Release) is never removed; copies are shared by the
// processes of one user and swept when no process holds them (see Cache).
package etccopy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The sandbox's /etc is a private copy of the allow-listed host entries,
// bound read-only as a single mount. bwrap's setup cost grows with every
// mount (each read-only bind rereads the mount table), and binding the
// allow-list entry by entry took some forty of them.
//
// The copy lives in a 0700 directory of this process ("apodex-etc-*",
// preferably on a tmpfs: $XDG_RUNTIME_DIR or /dev/shm, else the temporary
// directory). It holds only what Allow names: top-level entries are
// copied through symlinks (resolv.conf often points into /run, which the
// sandbox does not see), entries inside an allowed directory are copied as
// they are, symlinks included, so they resolve inside the sandbox exactly as
// a bind of the directory would. The host is re-examined at most every
// etcRecheck; when it changed, later sandboxes get a fresh copy and the old
// one is removed once no running sandbox uses it.
//
// Copies are shared between the processes of one user: a copy made from a
// given state of the host's entries is published under a name derived from
// its fingerprint (with the full fingerprint in its "stamp" file), and a
// later process whose host fingerprint matches uses it instead of copying
// (a copy costs tens of milliseconds at every start). Every process using a
// copy holds a shared lock on it; a private copy whose lock is free was left
// by a process that is gone, and a shared one unused for etcIdle too: the
// next copy made on the machine removes them.

// etcRecheck bounds how long the sandbox's /etc may lag behind the host's.
const etcRecheck = 2 * time.Second

// etcPrefix names the copies' directories.
const etcPrefix = "apodex-etc-"

// etcIdle is how long a shared copy nobody uses is kept for the next process.
const etcIdle = 10 * time.Minute

// Copy is one private copy of /etc.
type Copy struct {
	root    string   // the private directory; the copy is root/etc
	lock    *os.File // flocked while this process may use root
	stamp   [sha256.Size]byte
	users   int         // sandboxes running on it
	retired bool        // a newer copy replaced it
	shared  bool        // published for other processes (lock held shared)
	dirInfo fs.FileInfo // root as published: the name may be reused later
}

// Dir is the directory bound at /etc.
func (c *Copy) Dir() string { return filepath.Join(c.root, "etc") }

// Cache hands out the current copy of src (the host /etc).
type Cache struct {
	src   string
	bases func() []string // where a copy may be made, best first

	mu      sync.Mutex
	cur     *Copy
	checked time.Time
	swept   bool
}

var Host = &Cache{src: "/etc", bases: etcBases}

// etcBases prefers a tmpfs: a copy is a few hundred small files, and creating
// files on disk costs a fraction of a millisecond each.
func etcBases() []string {
	var out []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		out = append(out, d)
	}
	return append(out, "/dev/shm", os.TempDir())
}

// Acquire returns the copy a new sandbox binds; release it when the sandbox
// is gone.
func (c *Cache) Acquire() (*Copy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || time.Since(c.checked) >= etcRecheck {
		if !c.cur.current(c.src) {
			fresh, err := c.build()
			if err != nil {
				return nil, err
			}
			if old := c.cur; old != nil {
				old.retired = true
				if old.users == 0 {
					old.remove()
				}
			}
			c.cur = fresh
		}
		c.checked = time.Now()
	}
	c.cur.users++
	return c.cur, nil
}

// current reports whether the copy (nil: none yet) still matches the host
// and is still there (a temporary-file cleaner may have removed it).
func (e *Copy) current(src string) bool {
	if e == nil {
		return false
	}
	if _, err := os.Stat(e.Dir()); err != nil {
		return false
	}
	return etcStamp(src) == e.stamp
}

func (c *Cache) Release(e *Copy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.users--
	if e.retired && e.users == 0 {
		e.remove()
	}
}

// build returns the shared copy of the host's current entries, or makes a
// new copy in the first base that takes it and publishes it.
func (c *Cache) build() (*Copy, error) {
	stamp := etcStamp(c.src)
	name := etcPrefix + hex.EncodeToString(stamp[:12])
	var errs []error
	for _, base := range c.bases() {
		if e := openShared(filepath.Join(base, name), stamp); e != nil {
			return e, nil
		}
		if !c.swept {
			sweepEtc(base)
		}
		e, err := newEtcCopy(base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.stamp, err = copyEtc(c.src, e.Dir()); err != nil {
			e.remove()
			return nil, fmt.Errorf("sandbox: copy /etc: %w", err)
		}
		c.swept = true
		if e.stamp == stamp { // the host did not change while we copied
			e.publish(filepath.Join(base, name))
		}
		return e, nil
	}
	return nil, fmt.Errorf("sandbox: no directory for the private /etc (set TMPDIR to a writable directory): %w", errors.Join(errs...))
}

// openShared returns the published copy at root if it is ours, intact and
// made from stamp, with a shared lock taken on it; else nil.
func openShared(root string, stamp [sha256.Size]byte) *Copy {
	fi, err := os.Lstat(root)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedByUs(fi) {
		return nil
	}
	if b, err := os.ReadFile(filepath.Join(root, "stamp")); err != nil || !bytes.Equal(b, stamp[:]) {
		return nil
	}
	lock, err := os.OpenFile(filepath.Join(root, "lock"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	// A sweeper holds it exclusively while it decides: make a copy then.
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		lock.Close()
		return nil
	}
	again, err := os.Lstat(root)
	if _, eerr := os.Stat(filepath.Join(root, "etc")); err != nil || eerr != nil || !os.SameFile(fi, again) {
		lock.Close() // swept between our look and our lock
		return nil
	}
	now := time.Now()
	_ = os.Chtimes(root, now, now) // in use: not idle
	return &Copy{root: root, lock: lock, stamp: stamp, shared: true, dirInfo: again}
}

// publish renames the new copy to its shared name, unless another process
// published one first, and keeps a shared lock on it.
func (e *Copy) publish(root string) {
	if os.WriteFile(filepath.Join(e.root, "stamp"), e.stamp[:], 0o600) != nil {
		return
	}
	if os.Rename(e.root, root) != nil {
		return // someone else's is there: ours stays private
	}
	e.root, e.shared = root, true
	e.dirInfo, _ = os.Lstat(root)
	_ = syscall.Flock(int(e.lock.Fd()), syscall.LOCK_SH)
}

func newEtcCopy(base string) (*Copy, error) {
	root, err := os.MkdirTemp(base, etcPrefix+"new-*") // mode 0700
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(root, "lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err == nil {
		err = mkdir(filepath.Join(root, "etc"), 0o755)
	}
	e := &Copy{root: root, lock: lock}
	if err != nil {
		e.remove()
		return nil, err
	}
	return e, nil
}

// remove removes the copy: a shared one only if no other process uses it
// (else it just lets go of it).
func (e *Copy) remove() {
	if e.shared && (e.lock == nil || !e.stillThere() || syscall.Flock(int(e.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil) {
		if e.lock != nil {
			e.lock.Close()
		}
		return
	}
	os.RemoveAll(e.root)
	if e.lock != nil {
		e.lock.Close() // after the removal, so no sweeper races it
	}
}

// stillThere reports whether the shared name still is this copy (a cleaner
// may have removed it, and another copy taken the name).
func (e *Copy) stillThere() bool {
	fi, err := os.Lstat(e.root)
	return err == nil && e.dirInfo != nil && os.SameFile(fi, e.dirInfo)
}

// Remember notes in the copy that a check keyed by key passed, for later
// processes sharing it; Remembered tells.
func (e *Copy) Remember(what, key string) {
	if !e.shared {
		return
	}
	p := filepath.Join(e.root, "ok-"+what)
	if os.WriteFile(p+".tmp", []byte(key), 0o600) == nil {
		_ = os.Rename(p+".tmp", p)
	}
}

func (e *Copy) Remembered(what, key string) bool {
	b, err := os.ReadFile(filepath.Join(e.root, "ok-"+what))
	return err == nil && string(b) == key
}

// sweepEtc removes the copies in base that processes of our user left
// behind: private ones whose lock nobody holds, shared ones nobody holds and
// nobody used for etcIdle. One without a lock file yet is left alone unless
// it is old (its process died while making it).
func sweepEtc(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, d := range ents {
		if !d.IsDir() || !strings.HasPrefix(d.Name(), etcPrefix) {
			continue
		}
		root := filepath.Join(base, d.Name())
		fi, err := os.Lstat(root)
		if err != nil || !fi.IsDir() || !ownedByUs(fi) {
			continue
		}
		lock, err := os.OpenFile(filepath.Join(root, "lock"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && time.Since(fi.ModTime()) > time.Minute {
				os.RemoveAll(root)
			}
			continue
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_, serr := os.Stat(filepath.Join(root, "stamp"))
			if serr != nil || time.Since(fi.ModTime()) > etcIdle {
				os.RemoveAll(root)
			}
		}
		lock.Close()
	}
}

func ownedByUs(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// etcStamp fingerprints the host entries a copy is made from.
func etcStamp(src string) [sha256.Size]byte {
	h := sha256.New()
	walkEtc(src, func(rel, _ string, fi fs.FileInfo) error {
		stampEntry(h, rel, fi)
		return nil
	})
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func stampEntry(w io.Writer, rel string, fi fs.FileInfo) {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	io.WriteString(w, rel)
	binary.Write(w, binary.LittleEndian, [4]int64{int64(fi.Mode()), fi.Size(), fi.ModTime().UnixNano(), int64(ino)})
}

// copyEtc copies the allow-listed entries of src into dst and returns their
// fingerprint.
func copyEtc(src, dst string) ([sha256.Size]byte, error) {
	h := sha256.New()
	err := walkEtc(src, func(rel, host string, fi fs.FileInfo) error {
		stampEntry(h, rel, fi)
		to := filepath.Join(dst, rel)
		if err := mkdirParents(dst, rel); err != nil {
			return err
		}
		perm := fi.Mode().Perm()
		switch fi.Mode().Type() {
		case fs.ModeDir:
			return mkdir(to, perm|0o700) // we must be able to fill and remove it
		case fs.ModeSymlink:
			target, err := os.Readlink(host)
			if err != nil {
				return nil // gone meanwhile
			}
			return os.Symlink(target, to)
		case 0:
			return copyFile(host, to, perm)
		}
		return nil // sockets, fifos, devices: not configuration
	})
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, err
}

// mkdir makes dir with exactly perm, whatever the umask; an existing
// directory is left as it is.
func mkdir(dir string, perm fs.FileMode) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return os.Chmod(dir, perm)
}

// mkdirParents makes the missing parents of rel under dst (ssl for
// ssl/certs) mode 0755, as on a host.
func mkdirParents(dst, rel string) error {
	var parents []string
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		parents = append(parents, d)
	}
	for _, d := range slices.Backward(parents) {
		if err := mkdir(filepath.Join(dst, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return nil // unreadable to us, so to the sandbox too
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(perm) // exactly the host's, whatever the umask
	}
	return errors.Join(err, out.Close())
}

// walkEtc calls fn for every entry of src that Allow admits, each
// directory before its contents. A top-level match is seen through symlinks
// (host is then the resolved path); an entry inside an allowed directory is
// seen as it is (Lstat). Dangling and unreadable entries are skipped.
func walkEtc(src string, fn func(rel, host string, fi fs.FileInfo) error) error {
	seen := map[string]bool{}
	for _, pat := range Allow {
		matches, _ := filepath.Glob(filepath.Join(src, pat))
		for _, p := range matches {
			rel, err := filepath.Rel(src, p)
			if err != nil || seen[rel] {
				continue
			}
			seen[rel] = true
			host, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue
			}
			fi, err := os.Stat(host)
			if err != nil {
				continue
			}
			if !fi.IsDir() {
				if err := fn(rel, host, fi); err != nil {
					return err
				}
				continue
			}
			err = filepath.WalkDir(host, func(q string, d fs.DirEntry, err error) error {
				if err != nil || d == nil {
					return nil // unreadable: skip it
				}
				info, err := d.Info()
				if err != nil {
					return nil
				}
				sub, _ := filepath.Rel(host, q)
				return fn(filepath.Join(rel, sub), q, info)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Allow is what the sandbox sees of /etc (globs allowed). Anything
// missing on the host is skipped. See Cache for how it gets there.
var Allow = []string{
	"passwd", "group", "hosts", "host.conf", "resolv.conf", "nsswitch.conf",
	"gai.conf", "services", "protocols", "networks", "rpc",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "locale.alias", "locale.conf", "default/locale",
	"alternatives", "shells", "profile", "bash.bashrc", "inputrc", "terminfo",
	"os-release", "lsb-release", "debian_version", "alpine-release",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
	"pki/tls/certs", "pki/ca-trust", "crypto-policies",
	"mime.types", "magic", "magic.mime", "gitconfig", "wgetrc", "vim",
	"perl", "python3*", "java-*", "fonts", "xdg",
}
