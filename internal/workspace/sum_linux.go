package workspace

import (
	"crypto/sha256"
	"errors"
	"hash"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// planeDir is a plane's root opened for hashing the files the watch
// lists without an allocation per file (os.Root gives each lstat and open
// a FileInfo and a File): every name is resolved beneath the root with no
// link followed (openat2), a file is opened only once its lstat says it
// is regular, and is hashed only if it is still that file once open.
type planeDir struct{ fd int }

// errNoFast: this kernel has no openat2; the caller takes the os.Root way.
var errNoFast = errors.New("workspace: openat2 unavailable")

func openPlaneDir(root string) (planeDir, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return planeDir{fd: -1}, err
	}
	return planeDir{fd: fd}, nil
}

func (d planeDir) close() {
	if d.fd >= 0 {
		unix.Close(d.fd)
	}
}

var sha256s = sync.Pool{New: func() any { return sha256.New() }}

// sumRegular hashes rel if it is a regular file, and returns its sum,
// size and mtime; errNotRegular if it is something else.
func (d planeDir) sumRegular(rel string) (sum Sum, size, mtime int64, err error) {
	dir, name := path.Split(rel)
	pfd := d.fd
	if dir != "" {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		pfd, err = retry(func() (int, error) { return unix.Openat2(d.fd, dir, &how) })
		if errors.Is(err, unix.ENOSYS) {
			return sum, 0, 0, errNoFast
		}
		if err != nil {
			return sum, 0, 0, err
		}
		defer unix.Close(pfd)
	}
	var st, got unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sum, 0, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return sum, 0, 0, errNotRegular
	}
	fd, err := retry(func() (int, error) {
		return unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return sum, 0, 0, err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &got); err != nil {
		return sum, 0, 0, err
	}
	if got.Ino != st.Ino || got.Dev != st.Dev || got.Mode&unix.S_IFMT != unix.S_IFREG {
		return sum, 0, 0, errSwapped
	}
	h := sha256s.Get().(hash.Hash)
	defer sha256s.Put(h)
	h.Reset()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	for {
		n, err := unix.Read(fd, *buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return sum, 0, 0, err
		}
		if n == 0 {
			break
		}
		h.Write((*buf)[:n])
	}
	h.Sum(sum[:0])
	return sum, got.Size, got.Mtim.Nano(), nil
}

func retry(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if err != unix.EINTR {
			return fd, err
		}
	}
}
