//go:build !linux

package watch

import (
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

func entryOf(fi fs.FileInfo) Entry {
	e := Entry{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Blocks, e.UID, e.GID, e.Ino = int64(st.Blocks), st.Uid, st.Gid, uint64(st.Ino)
	}
	return e
}

func lstatIn(dir *os.File, name string) (Entry, error) {
	fi, err := os.Lstat(filepath.Join(dir.Name(), name))
	if err != nil {
		return Entry{}, err
	}
	return entryOf(fi), nil
}

// hashIn hashes the regular file name in dir if it is still of inode ino.
func hashIn(dir *os.File, name string, ino uint64) (Sum, bool) {
	f, err := os.OpenFile(filepath.Join(dir.Name(), name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Sum{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || entryOf(fi).Ino != ino {
		return Sum{}, false
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Sum{}, false
	}
	var sum Sum
	h.Sum(sum[:0])
	return sum, true
}
