//go:build unix

package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openNoLinks walks name from dir one element at a time with openat and
// O_NOFOLLOW, so a link swapped in while it walks is refused, not followed.
func openNoLinks(dir, name string) (*os.File, error) {
	fd, err := openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	els := strings.Split(name, "/")
	for i, el := range els {
		flags := unix.O_RDONLY | unix.O_NOFOLLOW
		if i < len(els)-1 {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK // a FIFO must not block the reader
		}
		next, err := openat(fd, el, flags)
		if err != nil {
			var st unix.Stat_t
			if unix.Fstatat(fd, el, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = &LinkError{Path: strings.Join(els[:i+1], "/")}
			} else {
				err = &os.PathError{Op: "open", Path: filepath.Join(dir, strings.Join(els[:i+1], "/")), Err: err}
			}
			unix.Close(fd)
			return nil, err
		}
		unix.Close(fd)
		fd = next
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
