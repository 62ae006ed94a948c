package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/apodex/apodex/internal/hostfs"
	"golang.org/x/sys/unix"
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

// upperFD is the helper's end of the socket that carries the upper layers.
const upperFD = 4

// sizedOverlay mounts at target an overlay of lower (a path the helper can
// resolve) whose upper layer is a new tmpfs of size bytes mounted at
// scratchDir and detached again once the overlay holds it. It returns a
// directory descriptor of the tmpfs's root (upper/ and work/ below it).
func sizedOverlay(lower, target, scratchDir string, size int64) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(lower, &st); err != nil {
		return -1, err
	}
	// A tmpfs that is never attached (Linux 5.2's mount API): nothing to
	// detach after, whose umount would wait for an expedited RCU grace
	// period on every command.
	// Where either is refused, the tmpfs is mounted and detached after.
	if fd, err := detachedTmpfs(size); err == nil {
		if overlayOn(lower, target, "/proc/self/fd/"+strconv.Itoa(fd), &st) == nil {
			return fd, nil
		}
		syscall.Close(fd)
	}
	if err := os.MkdirAll(scratchDir, 0o700); err != nil {
		return -1, err
	}
	opts := "mode=0700,size=" + strconv.FormatInt(max(size, 1), 10)
	if err := syscall.Mount("tmpfs", scratchDir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return -1, fmt.Errorf("upper tmpfs: %w", err)
	}
	fd, err := syscall.Open(scratchDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err == nil {
		err = overlayOn(lower, target, scratchDir, &st)
	}
	_ = syscall.Unmount(scratchDir, syscall.MNT_DETACH) // the overlay (and fd) keep it
	_ = os.Remove(scratchDir)
	if err != nil {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return -1, err
	}
	return fd, nil
}

// detachedTmpfs makes a tmpfs of size bytes, mode 0700, and returns a
// descriptor of its root; it is attached nowhere.
func detachedTmpfs(size int64) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer syscall.Close(fs)
	for _, kv := range [][2]string{{"size", strconv.FormatInt(max(size, 1), 10)}, {"mode", "0700"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

func overlayOn(lower, target, dir string, st *syscall.Stat_t) error {
	up, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{up, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	// The overlay's root takes the upper directory's owner and mode.
	if err := os.Lchown(up, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := os.Chmod(up, fs.FileMode(st.Mode&0o7777)); err != nil {
		return err
	}
	base := "lowerdir=" + lower + ",upperdir=" + up + ",workdir=" + work + ",index=off,metacopy=off,xino=off"
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)
	// User xattrs (what a user namespace allows), else trusted ones (host
	// root on a kernel whose tmpfs has no user xattrs). The kernel logs
	// every refused attempt, on a serial console a synchronous write inside
	// the mount call, so the variant that worked goes first next time.
	variants := []string{",userxattr", ",redirect_dir=off"}
	if overlayTrusted.Load() {
		variants[0], variants[1] = variants[1], variants[0]
	}
	var err error
	for _, v := range variants {
		if err = syscall.Mount("overlay", target, "overlay", flags, base+v); err == nil {
			overlayTrusted.Store(v != ",userxattr")
			return nil
		}
	}
	return fmt.Errorf("overlay on %s: %w", target, err)
}

// overlayTrusted says this process's last overlay took trusted xattrs.
var overlayTrusted atomic.Bool

// sendUpper passes the upper layer of mount i to the runner.
func sendUpper(i, fd int) error {
	var msg [4]byte
	binary.LittleEndian.PutUint32(msg[:], uint32(i))
	return syscall.Sendmsg(upperFD, msg[:], syscall.UnixRights(fd), nil, 0)
}

// overlayMount sets up mount i of the plan as a sized overlay at target
// (a path the helper mounts on), with lower resolvable by the helper, and
// sends its upper layer. It reports false (and leaves target alone) when the
// kernel refuses, so the caller binds the source instead.
func overlayMount(p plan, i int, lower, target string) bool {
	if i >= len(p.Spec.Sized) || p.Spec.Sized[i] <= 0 {
		return false
	}
	fd, err := sizedOverlay(lower, target, filepath.Join(os.TempDir(), ".upper-"+strconv.Itoa(i)), p.Spec.Sized[i])
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	if err := sendUpper(i, fd); err != nil {
		fail("pass the upper layer of %s: %v", p.Spec.Mounts[i].Target, err)
	}
	return true
}

// uppers is the runner's end of the upper layers of one command.
type uppers struct {
	mine, theirs *os.File
}

// newUppers makes the socket the helper sends upper layers on; theirs goes
// to the helper as fd 4.
func newUppers() (*uppers, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	return &uppers{mine: os.NewFile(uintptr(fds[0]), "uppers"), theirs: os.NewFile(uintptr(fds[1]), "uppers-helper")}, nil
}

// take returns the upper layers the helper sent, by mount index. Call it
// once the helper has exited: it reads only what is queued.
func (u *uppers) take() map[int]*os.File {
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
