package watch

import (
	"crypto/sha256"
	"hash"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// entryOf is the Entry of an lstat.
func entryOf(fi fs.FileInfo) Entry {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return Entry{Size: st.Size, Blocks: st.Blocks, Ino: st.Ino, MTime: st.Mtim.Nano(), Mode: ModeOf(st.Mode), UID: st.Uid, GID: st.Gid}
	}
	return Entry{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
}

// lstatIn lstats name in the directory dir lists, relative to its
// descriptor: no path is built, no link followed, no FileInfo allocated.
func lstatIn(dir *os.File, name string) (Entry, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Entry{}, err
		}
		return Entry{Size: st.Size, Blocks: st.Blocks, Ino: st.Ino, MTime: st.Mtim.Nano(), Mode: ModeOf(st.Mode), UID: st.Uid, GID: st.Gid}, nil
	}
}

var (
	hashBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	hashers  = sync.Pool{New: func() any { return sha256.New() }}
)

// hashIn hashes the regular file name in the directory dir lists if it is
// still the file of inode ino: opened relative to the listing, never
// through a link, never blocking on a FIFO, with no allocation per file.
func hashIn(dir *os.File, name string, ino uint64) (Sum, bool) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return Sum{}, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != ino {
		return Sum{}, false
	}
	h := hashers.Get().(hash.Hash)
	defer hashers.Put(h)
	h.Reset()
	buf := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(buf)
	for {
		n, err := unix.Read(fd, *buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Sum{}, false
		}
		if n == 0 {
			break
		}
		h.Write((*buf)[:n])
	}
	var sum Sum
	h.Sum(sum[:0])
	return sum, true
}
