//go:build !linux

package watch

import (
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
