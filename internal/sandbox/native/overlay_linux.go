package native

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/spec"
	"golang.org/x/sys/unix"
)

// upperFD is the helper's end of the socket that carries the upper layers.
const upperFD = 4

// Overlays makes sized overlays. It remembers which xattrs the kernel took
// for the last one, so a process making many (a live sandbox's server)
// tries that variant first; the zero value is ready.
type Overlays struct {
	trusted atomic.Bool // the last overlay took trusted xattrs
}

// Sized mounts at target an overlay of lower (a path the helper can
// resolve) whose upper layer is a new tmpfs of size bytes mounted at
// scratchDir and detached again once the overlay holds it. It returns a
// directory descriptor of the tmpfs's root (upper/ and work/ below it).
func (o *Overlays) Sized(lower, target, scratchDir string, size int64) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(lower, &st); err != nil {
		return -1, err
	}
	// A tmpfs that is never attached (Linux 5.2's mount API): nothing to
	// detach after, whose umount would wait for an expedited RCU grace
	// period on every command.
	// Where either is refused, the tmpfs is mounted and detached after.
	if fd, err := detachedTmpfs(size); err == nil {
		if o.on(lower, target, "/proc/self/fd/"+strconv.Itoa(fd), &st) == nil {
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
		err = o.on(lower, target, scratchDir, &st)
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

func (o *Overlays) on(lower, target, dir string, st *syscall.Stat_t) error {
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
	if o.trusted.Load() {
		variants[0], variants[1] = variants[1], variants[0]
	}
	var err error
	for _, v := range variants {
		if err = syscall.Mount("overlay", target, "overlay", flags, base+v); err == nil {
			o.trusted.Store(v != ",userxattr")
			return nil
		}
	}
	return fmt.Errorf("overlay on %s: %w", target, err)
}

// sendUpper passes the upper layer of mount i to the runner.
func sendUpper(i, fd int) error {
	var msg [4]byte
	binary.LittleEndian.PutUint32(msg[:], uint32(i))
	return syscall.Sendmsg(upperFD, msg[:], syscall.UnixRights(fd), nil, 0)
}

// mount sets up mount i of the plan as a sized overlay at target
// (a path the helper mounts on), with lower resolvable by the helper, and
// sends its upper layer. It reports false (and leaves target alone) when the
// kernel refuses, so the caller binds the source instead.
func (o *Overlays) mount(p plan, i int, lower, target string) bool {
	if i >= len(p.Spec.Sized) || p.Spec.Sized[i] <= 0 {
		return false
	}
	fd, err := o.Sized(lower, target, filepath.Join(os.TempDir(), ".upper-"+strconv.Itoa(i)), p.Spec.Sized[i])
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	if err := sendUpper(i, fd); err != nil {
		spec.Fail("pass the upper layer of %s: %v", p.Spec.Mounts[i].Target, err)
	}
	return true
}
