package limits

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/spec"
)

// A sparse file costs a command nothing (`truncate -s 1T`) but the runtime
// its apparent size: hashing it reads every hole as zeros and copying it
// (a merge, a commit) writes them. After each command, a regular file in a
// writable mount whose apparent size is larger than that mount's byte quota
// (or, without one, the workspace quota) while it has holes is removed, and
// the command's result names it. A file really written that large is over
// the quota anyway; a sparse one under the quota stays.

// sparseCap is the largest apparent size a sparse file in m may keep.
func sparseCap(m spec.Mount, lim spec.Limits) int64 {
	if m.Quota != nil && m.Quota.Bytes > 0 {
		return m.Quota.Bytes
	}
	return lim.Workspace.Bytes
}

// sparseGiant reports whether fi is a regular file with holes larger than
// limit bytes.
func sparseGiant(fi fs.FileInfo, limit int64) bool {
	if limit <= 0 || !fi.Mode().IsRegular() || fi.Size() <= limit {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Blocks*512 < fi.Size()
}

// SparseSweep wraps f (what eachEntry does to an entry) so that it first
// removes a sparse giant (through root, never following a link) and notes
// it in found, as its path in the sandbox.
func SparseSweep(ms []spec.Mount, lim spec.Limits, found *[]string, f func(*os.Root, string, fs.FileInfo) error) func(*os.Root, string, fs.FileInfo) error {
	caps := map[string]spec.Mount{}
	for _, m := range ms {
		caps[m.Source] = m
	}
	return func(root *os.Root, rel string, fi fs.FileInfo) error {
		m, ok := caps[root.Name()]
		if ok && sparseGiant(fi, sparseCap(m, lim)) {
			if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("sandbox: remove the sparse file %s: %w", filepath.Join(m.Target, rel), err)
			}
			*found = append(*found, fmt.Sprintf("%s (%s apparent)", filepath.Join(m.Target, rel), spec.Human(fi.Size())))
			return nil
		}
		return f(root, rel, fi)
	}
}

// SparseNote is the QuotaNote for the sparse files removed.
func SparseNote(found []string) string {
	return fmt.Sprintf("removed sparse files larger than their quota allows (a file with holes costs its whole size to hash and copy): %s; write only the data you need, or raise the quota (--workspace-quota, --scratch-quota)", strings.Join(found, ", "))
}
