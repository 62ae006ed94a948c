//go:build unix

package publish

import (
	"io/fs"
	"syscall"
)

// openRead opens without following a final link and without blocking on a
// FIFO; the caller still checks what it opened.
const openRead = syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// linkCount is the number of hard links of a file (1 when unknown).
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
