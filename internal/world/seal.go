package world

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/apodex/apodex/internal/watch"
)

// The seal (<world>/.seal, not hashed) is the stat of every directory and
// file of a stored world taken once it was frozen: what lets Intact prove
// an unchanged world unchanged without reading its files.
//
// What it trusts: the kernel's inode metadata on a local filesystem. A
// file replaced (renamed over, removed and created again) has another
// inode, and a file added, removed or renamed changes its directory's
// mtime and ctime, which no process can set back (short of setting the
// system clock back to that very nanosecond); a write to a file changes
// its mtime, and a stored file (0444 in a 0555 directory) can only be
// written after a chmod, which changes its mode. Files' ctimes are not
// compared: the hard links rollouts make to stored inputs and unchanged
// workspace files change them. So a world whose every directory has the
// inode, mode, mtime and ctime, and every file the inode, mode, size and
// mtime the seal recorded holds the bytes hashed when it was stored,
// unless someone with the store owner's or root's rights rewrote a file
// in place at the same size and then set its mtime and mode back
// (utimensat, chmod), or wrote below the filesystem (to the block device).
// `apodex worlds check` rehashes every file regardless (Rehash). Whenever
// a stat differs (a `touch`, a world stored before seals existed) Intact
// rehashes in full: the seal can only save work, never pass a world the
// hashes would refuse.
const sealFile = ".seal"

const sealMagic = "apodex-seal-v1\n"

// sealStat is what the seal compares of one entry: CTime only for
// directories but the top one (renaming it into the store changes it).
type sealStat struct{ Ino, Size, MTime, CTime, Mode int64 }

func statOf(fi fs.FileInfo) (sealStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return sealStat{}, false
	}
	s := sealStat{int64(st.Ino), fi.Size(), st.Mtim.Nano(), st.Ctim.Nano(), int64(st.Mode)}
	if !fi.IsDir() {
		s.CTime = 0
	}
	return s, true
}

// writeSeal records the stats of dir's directories (by slash path) and of
// files (in their order) in dir/.seal, which must exist (made before dir
// was frozen, so that writing it changes no directory).
func writeSeal(dir string, files []File) error {
	var buf bytes.Buffer
	buf.WriteString(sealMagic)
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return err
	}
	binary.Write(&buf, binary.LittleEndian, uint64(len(dirs)))
	for _, rel := range dirs {
		s, err := lstatSeal(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		if rel == "." {
			s.CTime = 0
		}
		binary.Write(&buf, binary.LittleEndian, uint64(len(rel)))
		buf.WriteString(rel)
		binary.Write(&buf, binary.LittleEndian, s)
	}
	binary.Write(&buf, binary.LittleEndian, uint64(len(files)))
	for _, f := range files {
		s, err := lstatSeal(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return err
		}
		binary.Write(&buf, binary.LittleEndian, s)
	}
	// The seal's own stat is not recorded: making it writable for a moment
	// changes only its ctime, writing it no directory.
	p := filepath.Join(dir, sealFile)
	if err := os.Chmod(p, 0o644); err != nil {
		return err
	}
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = out.Write(buf.Bytes())
	return errors.Join(err, out.Close(), os.Chmod(p, 0o444))
}

func lstatSeal(p string) (sealStat, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return sealStat{}, err
	}
	s, ok := statOf(fi)
	if !ok {
		return sealStat{}, fmt.Errorf("world: no inode for %s", p)
	}
	return s, nil
}

// sealed reports whether w's seal proves every directory and file as it
// was stored (see sealFile): false when there is no seal or any stat
// differs. It reads the seal and stats each entry, reading no file; n is
// the number of entries it compared.
func (w *World) sealed() (ok bool, n int) {
	raw, err := os.ReadFile(filepath.Join(w.Dir, sealFile))
	if err != nil || !bytes.HasPrefix(raw, []byte(sealMagic)) {
		return false, 0
	}
	r := bytes.NewReader(raw[len(sealMagic):])
	var count uint64
	if binary.Read(r, binary.LittleEndian, &count) != nil || count > uint64(len(raw)) {
		return false, 0
	}
	for range count {
		var l uint64
		if binary.Read(r, binary.LittleEndian, &l) != nil || l > uint64(r.Len()) {
			return false, n
		}
		name := make([]byte, l)
		r.Read(name)
		var want sealStat
		if binary.Read(r, binary.LittleEndian, &want) != nil || strings.Contains(string(name), "..") {
			return false, n
		}
		got, err := lstatSeal(filepath.Join(w.Dir, filepath.FromSlash(string(name))))
		if string(name) == "." {
			got.CTime = 0
		}
		n++
		if err != nil || got != want {
			return false, n
		}
	}
	if binary.Read(r, binary.LittleEndian, &count) != nil || count != uint64(len(w.Files)) {
		return false, n
	}
	stats := make([]sealStat, count)
	if binary.Read(r, binary.LittleEndian, stats) != nil {
		return false, n
	}
	if !w.filesAsSealed(stats) {
		return false, n
	}
	n += len(w.Files)
	w.sealStats = stats
	return true, n
}

// known is the hash of the workspace file rel, from the manifest, when e
// is the stat the seal recorded for it (the overlay shows a file of its
// lower layer with the lower inode): the content hashed when the world
// was stored, proven by the seal a moment ago. Only a world Intact proved
// by its seal knows anything.
func (w *World) known(rel string, e watch.Entry) (watch.Sum, bool) {
	var sum watch.Sum
	if w.sealStats == nil || !e.Mode.IsRegular() {
		return sum, false
	}
	p := "workspace/" + rel
	i, ok := slices.BinarySearchFunc(w.Files, p, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return sum, false
	}
	st, f := w.sealStats[i], w.Files[i]
	if int64(e.Ino) != st.Ino || e.Size != f.Bytes || e.MTime != st.MTime {
		return sum, false
	}
	if _, err := hex.Decode(sum[:], []byte(f.SHA256)); err != nil {
		return sum, false
	}
	return sum, true
}

// filesAsSealed stats every file, on as many goroutines as there are
// cores (at most 4: the stats are cheap, the walk is the kernel's), and
// reports whether each has the stat the seal recorded.
func (w *World) filesAsSealed(stats []sealStat) bool {
	workers := min(runtime.NumCPU(), 4, max(len(w.Files)/1024, 1))
	var bad atomic.Bool
	var wg sync.WaitGroup
	per := (len(w.Files) + workers - 1) / workers
	for k := range workers {
		lo, hi := k*per, min((k+1)*per, len(w.Files))
		wg.Go(func() {
			for i := lo; i < hi && !bad.Load(); i++ {
				f := w.Files[i]
				got, err := lstatSeal(filepath.Join(w.Dir, filepath.FromSlash(f.Path)))
				if err != nil || got != stats[i] || got.Size != f.Bytes {
					bad.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return !bad.Load()
}
