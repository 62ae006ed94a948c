//go:build !unix

package hostfs

import (
	"io/fs"
	"os"
	"strings"
)

// openNoLinks checks each element with Lstat before opening through an
// os.Root: not race-free, but no link is followed out of dir.
func openNoLinks(dir, name string) (*os.File, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	els := strings.Split(name, "/")
	for i := range els {
		p := strings.Join(els[:i+1], "/")
		fi, err := r.Lstat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &LinkError{Path: p}
		}
	}
	return r.Open(name)
}
