package command

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/apodex/apodex/internal/sandbox/limits"
	"github.com/apodex/apodex/internal/sandbox/spec"
	"github.com/apodex/apodex/internal/watch"
)

// ownMounts gives the writable mounts' contents to the sandbox uid when
// give is set, so the command can change what the runtime wrote there (the
// runtime, root, keeps full access); only entries not already owned are
// changed. The same walk measures the mounts that have a quota. Every change
// goes through an os.Root of the mount, so a concurrent command swapping a
// directory for a link cannot point it at a host file; links themselves are
// not followed.
func ownMounts(ms []spec.Mount, give bool, uid, gid int) (limits.Tally, error) {
	settled := func(e watch.Entry) bool {
		return e.Mode&(fs.ModeSetuid|fs.ModeSetgid) == 0 && (!give || int(e.UID) == uid && int(e.GID) == gid)
	}
	return eachEntry(ms, give, func(root *os.Root, rel string, fi fs.FileInfo) error {
		return giveTo(root, rel, fi, give, uid, gid)
	}, tend(give, uid, gid), settled)
}

func giveTo(root *os.Root, rel string, fi fs.FileInfo, give bool, uid, gid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !give || !ok || (int(st.Uid) == uid && int(st.Gid) == gid) {
		return nil
	}
	// A file the runtime is replacing right now (a parallel file tool
	// call) may be gone: nothing to give.
	if err := root.Lchown(rel, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: give %s to the sandbox uid %d: %w", filepath.Join(root.Name(), rel), uid, err)
	}
	return nil
}

// tend is what is done to an entry of a watched mount that changed since
// the last command (before or after one): it is given to the sandbox uid
// and loses any setuid/setgid bit.
func tend(give bool, uid, gid int) func(root *os.Root, rel string, fi fs.FileInfo) error {
	return func(root *os.Root, rel string, fi fs.FileInfo) error {
		if err := clearSetid(root, rel, fi); err != nil {
			return err
		}
		return giveTo(root, rel, fi, give, uid, gid)
	}
}

// stripSetid clears setuid and setgid bits on everything in the writable
// mounts after a command (chmod works on a nosuid mount; the bits must not
// outlive the sandbox in the run directory), removes sparse giants
// (limits.SparseSweep, returned) and measures the mounts that have a quota. Links are skipped; the chmod resolves inside the mount only.
func stripSetid(ms []spec.Mount, lim spec.Limits) (limits.Tally, []string, error) {
	uid, gid, give := spec.IDs()
	var sparse []string
	t, err := eachEntry(ms, true, limits.SparseSweep(ms, lim, &sparse, clearSetid), limits.SparseSweep(ms, lim, &sparse, tend(give, uid, gid)), nil)
	return t, sparse, err
}

func clearSetid(root *os.Root, rel string, fi fs.FileInfo) error {
	m := fi.Mode()
	if m&fs.ModeSymlink != 0 || m&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
		return nil
	}
	if err := root.Chmod(rel, m.Perm()|(m&fs.ModeSticky)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: clear setuid/setgid on %s: %w", filepath.Join(root.Name(), rel), err)
	}
	return nil
}

// eachEntry calls f on every entry of the writable mounts (the mount's own
// directory included, as "."), all of them when every is set, else only
// those with a quota, through an os.Root of the mount, and measures the
// mounts with a quota on the way. It returns the first error of f.
//
// A watched mount (Watch set) is not walked: tracked is called on the entries that
// changed since the last call for it (whatever every says), and its tally
// comes from its tree's running totals.
//
// settled (nil: none) tells an entry of a watched mount that needs
// nothing from its stat as of the sync: it is not looked at again.
func eachEntry(ms []spec.Mount, every bool, f, tracked func(root *os.Root, rel string, fi fs.FileInfo) error, settled func(watch.Entry) bool) (limits.Tally, error) {
	var first error
	t := limits.Tally{}
	for i, m := range ms {
		q := m.Quota
		if !m.Writable || (!every && q == nil && m.Watch == nil) {
			continue
		}
		root, err := os.OpenRoot(m.Source)
		if err != nil {
			return t, fmt.Errorf("sandbox: open mount %s: %w", m.Source, err)
		}
		if m.Watch != nil {
			err := eachChanged(root, m.Watch, m.Source, tracked, settled)
			root.Close()
			if err != nil && first == nil {
				first = err
			}
			if q != nil {
				b, f := limits.UsageOf(m)
				t[i] = [2]int64{b, f}
			}
			continue
		}
		var bytes, files int64
		// Discovery by path (fast; it never follows links); every change
		// goes through root.
		_ = filepath.WalkDir(m.Source, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, err := filepath.Rel(m.Source, p)
			if err != nil {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			if rel != "." && q != nil {
				files++
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && !q.Apparent {
					bytes += st.Blocks * 512
				} else if q.Apparent && fi.Mode().IsRegular() {
					bytes += fi.Size()
				}
			}
			if err := f(root, rel, fi); err != nil && first == nil {
				first = err
			}
			return nil
		})
		root.Close()
		if q != nil {
			t[i] = [2]int64{bytes, files}
		}
	}
	return t, first
}

// eachChanged calls f on every entry of the dir watched in set that
// changed since the last call for it (all of them the first time).
func eachChanged(root *os.Root, set *watch.Set, dir string, f func(root *os.Root, rel string, fi fs.FileInfo) error, settled func(watch.Entry) bool) error {
	tr, err := set.For(dir)
	if err != nil {
		return fmt.Errorf("sandbox: watch mount %s: %w", dir, err)
	}
	var first error
	// An entry the sync just saw owned by the sandbox uid and without
	// setuid/setgid (a world's file through its idmapped lower layer)
	// needs nothing: no path, no lstat for each of a large world's files.
	need := func(e watch.Entry) bool { return settled == nil || !settled(e) }
	for _, rel := range tr.Shared("sandbox").TakeWhere(need) {
		fi, err := root.Lstat(rel)
		if err != nil {
			continue // gone again
		}
		if err := f(root, rel, fi); err != nil && first == nil {
			first = err
		}
	}
	return first
}
