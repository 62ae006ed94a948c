package workspace

import (
	"errors"
	"os"
)

// Hasher hashes the regular files beneath one directory, without an
// allocation per file where the kernel has openat2 (see planeDir) and
// through os.Root elsewhere. Neither way follows a link or leaves the
// directory; a name that is not a regular file is an error matching
// ErrNotRegular. A Hasher is for one goroutine at a time.
type Hasher struct {
	root string
	pd   planeDir
	r    *os.Root // the portable way, opened when first needed
}

// ErrNotRegular is matched by Hasher.Sum's error for a name that is a
// link, a directory or a special file.
var ErrNotRegular = errNotRegular

// NewHasher opens dir for hashing.
func NewHasher(dir string) (*Hasher, error) {
	pd, err := openPlaneDir(dir)
	if err != nil && !errors.Is(err, errNoFast) {
		return nil, err
	}
	return &Hasher{root: dir, pd: pd}, nil
}

// Sum returns the hash, size and mtime (ns) of the regular file rel.
func (h *Hasher) Sum(rel string) (sum Sum, size, mtime int64, err error) {
	sum, size, mtime, err = h.pd.sumRegular(rel)
	if !errors.Is(err, errNoFast) {
		return sum, size, mtime, err
	}
	if h.r == nil {
		if h.r, err = os.OpenRoot(h.root); err != nil {
			return Sum{}, 0, 0, err
		}
	}
	rec, err := recIn(h.r, rel)
	return rec.sum, rec.size, rec.mtime, err
}

// Close releases the directory.
func (h *Hasher) Close() {
	h.pd.close()
	if h.r != nil {
		h.r.Close()
	}
}
