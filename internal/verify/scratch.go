package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// reportDir makes a clause's report directory: a "report" directory inside
// a new private (0700) directory under scratch. It is world-writable so the
// command can write it whatever host uid the sandbox maps it to; the
// private parent keeps every other local user out. done removes both.
func reportDir(scratch string) (dir string, done func(), err error) {
	parent, err := os.MkdirTemp(scratch, "apodex-verify-")
	if err != nil {
		return "", nil, err
	}
	done = func() { os.RemoveAll(parent) } // RemoveAll never follows a link
	dir = filepath.Join(parent, "report")
	if err = os.Mkdir(dir, 0o700); err == nil {
		err = os.Chmod(dir, 0o777)
	}
	if err != nil {
		done()
		return "", nil, err
	}
	return dir, done, nil
}

// openReport opens the regular file rel inside the report directory
// through os.Root: a link the command left there, or a path out of it, is
// refused, and a FIFO cannot block the read.
func openReport(dir, rel string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s/%s was not written: the command must write its JUnit report there (e.g. pytest --junitxml=%s/%s)", "/report", rel, "/report", rel)
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("/report/%s is not a regular file (%s)", rel, fi.Mode().Type())
	case fi.Size() > maxReport:
		return nil, fmt.Errorf("/report/%s is %d bytes, more than the %d a report may have", rel, fi.Size(), maxReport)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, fmt.Errorf("/report/%s changed while being opened", rel)
	}
	return f, nil
}
