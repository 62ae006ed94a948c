//go:build !linux

package workspace

import "errors"

// planeDir: without openat2 the index hashes through os.Root.
type planeDir struct{}

var errNoFast = errors.New("workspace: openat2 unavailable")

func openPlaneDir(string) (planeDir, error)                   { return planeDir{}, errNoFast }
func (planeDir) close()                                       {}
func (planeDir) sumRegular(string) (Sum, int64, int64, error) { return Sum{}, 0, 0, errNoFast }
