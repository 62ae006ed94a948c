package hostfs

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// LinkError is a read refused because a symbolic link is on the way: Path
// (relative to the directory read from) is the link.
type LinkError struct{ Path string }

func (e *LinkError) Error() string { return e.Path + " is a symbolic link; not followed" }

// Is makes a LinkError match ErrLink.
func (e *LinkError) Is(target error) bool { return target == ErrLink }

// ErrNotRegular: the name is there but is not a regular file.
var ErrNotRegular = errors.New("hostfs: not a regular file")

// OpenFile opens the regular file name (a clean relative slash path, see
// CheckName) below dir for reading. No symbolic link below dir is followed,
// neither a parent directory nor the file itself (a *LinkError, matching
// ErrLink, names it), and the walk is race-free: each element is opened
// relative to the descriptor of the one before, never by its whole path.
// dir itself is trusted. A FIFO, device or directory is refused
// (ErrNotRegular) without blocking.
func OpenFile(dir, name string) (*os.File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	f, err := openNoLinks(dir, name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is a %s", ErrNotRegular, name, kind(st.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the regular file name below dir as OpenFile opens it. With
// max > 0 a larger file is refused rather than read.
func ReadFile(dir, name string, max int64) ([]byte, error) {
	f, err := OpenFile(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpened(f, name, max)
}

// ReadOpened reads the file f opened (name: how errors call it). With
// max > 0 a larger file is refused rather than read.
func ReadOpened(f *os.File, name string, max int64) ([]byte, error) {
	if max > 0 {
		if st, err := f.Stat(); err == nil && st.Size() > max {
			return nil, fmt.Errorf("hostfs: %s is %d bytes, over the %d read", name, st.Size(), max)
		}
	}
	return io.ReadAll(f)
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
