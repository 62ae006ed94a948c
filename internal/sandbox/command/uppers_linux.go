package command

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/apodex/apodex/internal/hostfs"
)

// A writable mount whose Quota refuses (Quota.Refuse) is not bound as it
// is: the helper mounts an overlay at its target whose lower layer is the
// mount's source and whose upper layer is a fresh tmpfs sized to what the
// quota has left. A write past the quota then fails inside the command
// (ENOSPC), instead of being measured after it. The helper sends a
// directory descriptor of that tmpfs to the runner (fd 4, one SCM_RIGHTS
// message per mount carrying its index) before the command starts; the
// descriptor keeps the tmpfs alive whatever happens to the sandbox, so
// after the command (also a killed one) the runner merges the upper layer
// into the source (mergeUpper): files, directories, links, deletions
// (whiteouts) and replaced directories (opaque ones), through hostfs, never
// outside the source. If the kernel refuses the overlay the helper binds the
// source as usual and sends nothing; the quota is then measured as for any
// other mount.
//
// While a command runs, the upper layer counts in pages (a small file takes
// a page), a file changed in place is copied up whole, so it needs room for
// all of it, and deleting a file that was there before the command frees
// its room for the next command, not this one.

// Uppers is the runner's end of the upper layers of one command.
type Uppers struct {
	mine, theirs *os.File
}

// NewUppers makes the socket the helper sends upper layers on; theirs goes
// to the helper as fd 4.
func NewUppers() (*Uppers, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	return &Uppers{mine: os.NewFile(uintptr(fds[0]), "uppers"), theirs: os.NewFile(uintptr(fds[1]), "uppers-helper")}, nil
}

// Theirs is the helper's end, which it gets as fd 4.
func (u *Uppers) Theirs() *os.File { return u.theirs }

// Take returns the upper layers the helper sent, by mount index. Call it
// once the helper has exited: it reads only what is queued.
func (u *Uppers) Take() map[int]*os.File {
	u.theirs.Close()
	defer u.mine.Close()
	out := map[int]*os.File{}
	raw, err := u.mine.SyscallConn()
	if err != nil {
		return out
	}
	for {
		var msg [4]byte
		oob := make([]byte, syscall.CmsgSpace(4))
		var n, oobn int
		var rerr error
		_ = raw.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), msg[:], oob, syscall.MSG_DONTWAIT|syscall.MSG_CMSG_CLOEXEC)
			return true
		})
		if rerr != nil || n < 4 {
			return out
		}
		cms, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(cms) == 0 {
			continue
		}
		fds, err := syscall.ParseUnixRights(&cms[0])
		if err != nil || len(fds) == 0 {
			continue
		}
		i := int(binary.LittleEndian.Uint32(msg[:]))
		if old := out[i]; old != nil {
			old.Close()
		}
		out[i] = os.NewFile(uintptr(fds[0]), "upper-"+strconv.Itoa(i))
		for _, extra := range fds[1:] {
			syscall.Close(extra)
		}
	}
}

// upperFull reports whether the upper layer has no page left, that is, a
// write past the quota was (or would have been) refused.
func upperFull(f *os.File) bool {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	return st.Bavail == 0
}

// Extended attributes overlayfs marks a directory that replaces the lower
// one with.
var opaqueAttrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// upperEmpty reports whether the upper layer holds nothing: the command
// wrote, deleted and replaced nothing in the overlay.
func upperEmpty(up *os.File) bool {
	fd, err := syscall.Openat(int(up.Fd()), "upper", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	d := os.NewFile(uintptr(fd), "upper")
	defer d.Close()
	names, err := d.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// mergeUpper applies the upper layer of one command (up: the tmpfs root,
// holding upper/) to dst, the mount's source: what the command created or
// changed is written, what it removed is removed. The command has ended, so
// the layer no longer changes; links in it are recreated as links, never
// followed; every write goes through hostfs, inside dst. Special files other
// than whiteouts are skipped, and so is a file larger than the layer could
// hold (a sparse one: copied, it would take its whole size on the host);
// those are returned. It returns the first error and goes on past it.
func mergeUpper(up *os.File, dst string) (skipped []string, _ error) {
	var sfs syscall.Statfs_t
	if err := syscall.Fstatfs(int(up.Fd()), &sfs); err != nil {
		return nil, fmt.Errorf("sandbox: measure the upper layer: %w", err)
	}
	capacity := int64(sfs.Blocks) * sfs.Bsize
	base := fmt.Sprintf("/proc/self/fd/%d/upper", up.Fd())
	if upperEmpty(up) {
		return nil, nil // most commands leave scratch alone
	}
	src, err := os.OpenRoot(base)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open the upper layer: %w", err)
	}
	defer src.Close()
	d, err := hostfs.Open(dst)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	_ = fs.WalkDir(src.FS(), ".", func(rel string, e fs.DirEntry, err error) error {
		if err != nil {
			keep(err)
			return nil
		}
		if rel == "." {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			keep(err)
			return nil
		}
		m := fi.Mode()
		switch {
		case m&fs.ModeCharDevice != 0 && rdev(fi) == 0: // a whiteout
			keep(d.RemoveAll(rel))
		case m.IsDir():
			old, err := d.Lstat(rel)
			switch {
			case err == nil && (!old.IsDir() || opaque(base, rel)):
				keep(d.RemoveAll(rel))
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				keep(err)
				return fs.SkipDir
			}
			if err := d.MkdirAll(rel, m.Perm()); err != nil {
				keep(err)
				return fs.SkipDir
			}
			keep(d.Root().Chmod(rel, m.Perm()|m&fs.ModeSticky))
		case m.IsRegular() && fi.Size() > capacity:
			skipped = append(skipped, rel)
		case m.IsRegular():
			keep(replaceFrom(d, src, rel, m.Perm()))
		case m&fs.ModeSymlink != 0:
			to, err := src.Readlink(rel)
			if err == nil {
				err = clearDir(d, rel)
			}
			if err == nil {
				err = d.Symlink(to, rel)
			}
			keep(err)
		}
		return nil
	})
	return skipped, first
}

func replaceFrom(d *hostfs.Dir, src *os.Root, rel string, perm fs.FileMode) error {
	if err := clearDir(d, rel); err != nil {
		return err
	}
	f, err := src.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = d.Replace(rel, f, perm, "")
	return err
}

// clearDir removes a directory at rel, which a file or link replaces.
func clearDir(d *hostfs.Dir, rel string) error {
	if fi, err := d.Lstat(rel); err == nil && fi.IsDir() {
		return d.RemoveAll(rel)
	}
	return nil
}

func rdev(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Rdev
	}
	return 1
}

// opaque reports whether the upper directory rel hides the lower one.
func opaque(base, rel string) bool {
	var buf [8]byte
	for _, a := range opaqueAttrs {
		if n, err := syscall.Getxattr(filepath.Join(base, rel), a, buf[:]); err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}
