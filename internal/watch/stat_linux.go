package watch

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// entryOf is the Entry of an lstat.
func entryOf(fi fs.FileInfo) Entry {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return Entry{Size: st.Size, Blocks: st.Blocks, Ino: st.Ino, MTime: st.Mtim.Nano(), Mode: modeOf(st.Mode), UID: st.Uid, GID: st.Gid}
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
		return Entry{Size: st.Size, Blocks: st.Blocks, Ino: st.Ino, MTime: st.Mtim.Nano(), Mode: modeOf(st.Mode), UID: st.Uid, GID: st.Gid}, nil
	}
}

// modeOf converts a stat mode as os.Lstat does, so both ways of looking
// at an entry give equal Entries.
func modeOf(sm uint32) fs.FileMode {
	m := fs.FileMode(sm & 0o777)
	switch sm & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if sm&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if sm&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if sm&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
