package worktree

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// nonBlock keeps an open of a FIFO swapped in from blocking.
const nonBlock = syscall.O_NONBLOCK

// mount mounts an overlay of lower at merged. redirect_dir and metacopy are
// off so that every changed file in upper holds its full content and a
// renamed directory is a plain copy plus whiteout, which is all Changes reads.
func mount(lower, upper, work, merged string) error {
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work +
		",redirect_dir=off,metacopy=off,index=off"
	return syscall.Mount("overlay", merged, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV, opts)
}

// unmount detaches mp, lazily if it is busy (a process still has a file open
// or its cwd there).
func unmount(mp string) error {
	err := syscall.Unmount(mp, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
		return nil // not (or no longer) a mount point
	}
	return err
}

// mountsUnder lists the mount points at or under dir in this mount
// namespace, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if mp := unescapeMountinfo(fields[4]); within(dir, mp) {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountinfo decodes the octal escapes (\040 for a space, ...) the
// kernel writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return filepath.Clean(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return filepath.Clean(b.String())
}

// isWhiteout tells an overlayfs whiteout: a character device 0:0.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque tells an upper directory that hides everything below it in the
// lower one.
func isOpaque(dir string) bool {
	var buf [1]byte
	n, err := syscall.Getxattr(dir, "trusted.overlay.opaque", buf[:])
	return err == nil && n == 1 && buf[0] == 'y'
}

// changeTime is the inode change time, which no one can set back.
func changeTime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// lockDir takes an exclusive flock(2) on dir, released by the returned func.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
