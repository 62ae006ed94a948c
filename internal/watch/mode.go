package watch

import (
	"io/fs"
	"syscall"
)

// ModeOf converts a stat mode as os.Lstat does, so every way of looking
// at an entry (a stat here, a stored seal in package world) gives equal
// Entries.
func ModeOf(sm uint32) fs.FileMode {
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
