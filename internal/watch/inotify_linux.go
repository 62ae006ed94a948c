package watch

import (
	"syscall"
	"unsafe"
)

// mask is what a directory watch reports: every change of an entry in it,
// and of itself. IN_CLOSE_WRITE catches writes through a memory mapping.
const mask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MODIFY | syscall.IN_ATTRIB |
	syscall.IN_CLOSE_WRITE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
	syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF |
	syscall.IN_DONT_FOLLOW | syscall.IN_ONLYDIR | syscall.IN_EXCL_UNLINK

// inotifyInit opens the process's inotify descriptor, or returns -1.
func inotifyInit() int {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return -1
	}
	return fd
}

func addWatch(fd int, dir string) (int32, error) {
	wd, err := syscall.InotifyAddWatch(fd, dir, mask)
	return int32(wd), err
}

func rmWatch(fd int, wd int32) {
	if fd >= 0 {
		_, _ = syscall.InotifyRmWatch(fd, uint32(wd))
	}
}

// drain reads every queued event and dispatches it. mu is held.
func drain() {
	if ifd < 0 {
		return
	}
	for {
		n, err := syscall.Read(ifd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return // EAGAIN: the queue is empty
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameAt := off + syscall.SizeofInotifyEvent
			name := buf[nameAt : nameAt+int(ev.Len)]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			event(ev.Wd, ev.Mask, string(name))
			off = nameAt + int(ev.Len)
		}
	}
}

const (
	inQOverflow = syscall.IN_Q_OVERFLOW
	inIgnored   = syscall.IN_IGNORED
	inSelf      = syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF
	inWrite     = syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE
)
