package world

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/apodex/apodex/internal/watch"
	"golang.org/x/sys/unix"
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
// compared: the hard links rollouts make to stored inputs, and those a
// materialized tree makes to workspace files (runfiles.Materialize),
// change them. So a world whose every directory has the
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

// The seal's versions: v1 records each file's inode, size, mtime, ctime (0)
// and mode (40 bytes); v2 its inode, mtime, allocated blocks and mode (28
// bytes: the size is the manifest's, which the check compares anyway)
// and, after the files, the owner of every entry when there is one (what
// a rollout's watch needs to fill its tree without a stat per file: a
// 100,000-file world's seal takes 2.8 MB of memory, not 4.8). A v1 seal
// still proves a world; its rollouts' watches walk the workspace instead.
const (
	sealMagic   = "apodex-seal-v2\n"
	sealMagicV1 = "apodex-seal-v1\n"
)

// sealStat is what the seal compares of one entry: CTime only for
// directories but the top one (renaming it into the store changes it).
type sealStat struct{ Ino, Size, MTime, CTime, Mode int64 }

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
	own := sealOwner{Single: 1}
	for i, f := range files {
		var st syscall.Stat_t
		s, err := lstatSealTo(filepath.Join(dir, filepath.FromSlash(f.Path)), &st)
		if err != nil {
			return err
		}
		binary.Write(&buf, binary.LittleEndian, sealFileV2{s.Ino, s.MTime, st.Blocks, uint32(s.Mode)})
		own.see(st.Uid, st.Gid, i == 0)
	}
	for _, rel := range dirs {
		var st syscall.Stat_t
		if _, err := lstatSealTo(filepath.Join(dir, filepath.FromSlash(rel)), &st); err != nil {
			return err
		}
		own.see(st.Uid, st.Gid, len(files) == 0 && rel == ".")
	}
	binary.Write(&buf, binary.LittleEndian, own)
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

// sealOwner is the owner of every entry of a stored world (Single 1), or
// Single 0 when entries have different owners.
type sealOwner struct{ UID, GID, Single uint32 }

func (o *sealOwner) see(uid, gid uint32, first bool) {
	if first {
		o.UID, o.GID = uid, gid
	} else if o.UID != uid || o.GID != gid {
		o.Single = 0
	}
}

// lstatSeal is the seal's stat of p, taken without a FileInfo (a check
// of 100,000 files allocated 40 MB of them).
func lstatSeal(p string) (sealStat, error) {
	var st syscall.Stat_t
	return lstatSealTo(p, &st)
}

// lstatSealTo is lstatSeal that leaves the whole stat in st.
func lstatSealTo(p string, st *syscall.Stat_t) (sealStat, error) {
	for {
		err := syscall.Lstat(p, st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return sealStat{}, &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		break
	}
	s := sealStat{int64(st.Ino), st.Size, st.Mtim.Nano(), st.Ctim.Nano(), int64(st.Mode)}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		s.CTime = 0
	}
	return s, nil
}

// sealRecord is a seal as read: its directories' stats by slash path and
// its files' stats by w.Files; a v2 seal's files' blocks (else nil) and
// owner.
type sealRecord struct {
	dirs  []sealDir
	files []byte // each file's record as the seal holds it (decoded on use: no copy)
	v2    bool   // files holds sealFileV2 records, else sealStat ones
	owner sealOwner
}

// sealFileV2 is a file's record in a v2 seal.
type sealFileV2 struct {
	Ino, MTime, Blocks int64
	Mode               uint32
}

// Sizes of a file's record in a seal.
const (
	sealStatSize   = 5 * 8
	sealFileV2Size = 3*8 + 4
)

// file is the seal's stat of w.Files[i], whose manifest size is size (a
// v2 seal's record has none of its own).
func (r *sealRecord) file(i int, size int64) sealStat {
	le := binary.LittleEndian
	if r.v2 {
		b := r.files[i*sealFileV2Size : (i+1)*sealFileV2Size]
		return sealStat{Ino: int64(le.Uint64(b)), Size: size, MTime: int64(le.Uint64(b[8:])), Mode: int64(le.Uint32(b[24:]))}
	}
	b := r.files[i*sealStatSize : (i+1)*sealStatSize]
	return sealStat{int64(le.Uint64(b)), int64(le.Uint64(b[8:])), int64(le.Uint64(b[16:])), int64(le.Uint64(b[24:])), int64(le.Uint64(b[32:]))}
}

// block is the blocks of w.Files[i] (a v2 seal).
func (r *sealRecord) block(i int) int64 {
	return int64(binary.LittleEndian.Uint64(r.files[i*sealFileV2Size+16:]))
}

type sealDir struct {
	rel string
	st  sealStat
}

// readSeal reads w's seal without comparing anything: nil when there is
// none, or it is damaged, or it does not list w.Files.
func (w *World) readSeal() *sealRecord {
	raw, err := os.ReadFile(filepath.Join(w.Dir, sealFile))
	v2 := bytes.HasPrefix(raw, []byte(sealMagic))
	if err != nil || !v2 && !bytes.HasPrefix(raw, []byte(sealMagicV1)) {
		return nil
	}
	r := bytes.NewReader(raw[len(sealMagic):])
	var count uint64
	if binary.Read(r, binary.LittleEndian, &count) != nil || count > uint64(len(raw)) {
		return nil
	}
	rec := &sealRecord{}
	for range count {
		var l uint64
		if binary.Read(r, binary.LittleEndian, &l) != nil || l > uint64(r.Len()) {
			return nil
		}
		name := make([]byte, l)
		r.Read(name)
		var want sealStat
		if binary.Read(r, binary.LittleEndian, &want) != nil || strings.Contains(string(name), "..") {
			return nil
		}
		rec.dirs = append(rec.dirs, sealDir{string(name), want})
	}
	if binary.Read(r, binary.LittleEndian, &count) != nil || count != uint64(len(w.Files)) {
		return nil
	}
	// The files' records stay in raw: taken, not copied.
	take := func(n uint64) []byte {
		if n > uint64(r.Len()) {
			return nil
		}
		at := len(raw) - r.Len()
		r.Seek(int64(n), io.SeekCurrent)
		return raw[at : at+int(n) : at+int(n)]
	}
	size := uint64(sealStatSize)
	if rec.v2 = v2; v2 {
		size = sealFileV2Size
	}
	if rec.files = take(count * size); rec.files == nil {
		return nil
	}
	if v2 && binary.Read(r, binary.LittleEndian, &rec.owner) != nil || r.Len() != 0 {
		return nil
	}
	return rec
}

// sealed reports whether w's seal proves every directory and file as it
// was stored (see sealFile): false when there is no seal or any stat
// differs. It reads the seal and stats each entry, reading no file; n is
// the number of entries it compared.
func (w *World) sealed(workers int) (ok bool, n int) {
	rec := w.seal()
	if rec == nil {
		return false, 0
	}
	ok, n = w.dirsAsSealed(rec)
	if !ok || !w.filesAsSealed(rec, workers) {
		return false, n
	}
	return true, n + len(w.Files)
}

// dirsAsSealed stats every directory the seal lists (a world of 100,000
// files has about a hundredth as many) and reports whether each is as it
// was: what a file added, removed, renamed or replaced changes; n is the
// number compared.
func (w *World) dirsAsSealed(rec *sealRecord) (ok bool, n int) {
	for _, d := range rec.dirs {
		got, err := lstatSeal(filepath.Join(w.Dir, filepath.FromSlash(d.rel)))
		if d.rel == "." {
			got.CTime = 0
		}
		n++
		if err != nil || got != d.st {
			return false, n
		}
	}
	return true, n
}

// seal is w's seal, read once per loaded world (nil: none usable).
func (w *World) seal() *sealRecord {
	if w.seals == nil { // a World not made by the store: read each time
		return w.readSeal()
	}
	w.seals.once.Do(func() { w.seals.rec = w.readSeal() })
	return w.seals.rec
}

// known is the hash of the workspace file rel, from the manifest, when e
// is the stat the seal recorded for it (the overlay shows a file of its
// lower layer with the lower inode): the content hashed when the world
// was stored. It trusts the seal as far as Intact does (the same stats
// compared), and no further: a rollout's result counts only once Intact
// proved the whole world (Stage starts that check, the run waits for it
// before its verification, delivery and trainability), so a world whose
// seal does not hold has its rollout refused whatever known said.
func (w *World) known(rel string, e watch.Entry) (watch.Sum, bool) {
	var sum watch.Sum
	rec := w.seal()
	if rec == nil || !e.Mode.IsRegular() {
		return sum, false
	}
	p := "workspace/" + rel
	i, ok := slices.BinarySearchFunc(w.Files, p, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return sum, false
	}
	st, f := rec.file(i, w.Files[i].Bytes), w.Files[i]
	if int64(e.Ino) != st.Ino || e.Size != f.Bytes || e.MTime != st.MTime {
		return sum, false
	}
	return watch.Sum(f.SHA256), true
}

// filesAsSealed stats every file, on up to workers goroutines (no more
// than there are cores: the stats are cheap, the walk is the kernel's), and
// reports whether each has the stat the seal recorded. Each file is
// statted relative to its directory, opened once per run of files in it
// (no path to build and resolve per file).
func (w *World) filesAsSealed(rec *sealRecord, workers int) bool {
	workers = max(min(runtime.NumCPU(), workers, len(w.Files)/1024), 1)
	var bad atomic.Bool
	var wg sync.WaitGroup
	per := (len(w.Files) + workers - 1) / workers
	for k := range workers {
		lo, hi := k*per, min((k+1)*per, len(w.Files))
		wg.Go(func() {
			var d dirAt
			defer d.close()
			for i := lo; i < hi && !bad.Load(); i++ {
				f := w.Files[i]
				fd, name := d.open(w.Dir, f.Path)
				var st unix.Stat_t
				if fd < 0 || unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					bad.Store(true)
					break
				}
				got := sealStat{int64(st.Ino), st.Size, st.Mtim.Nano(), 0, int64(st.Mode)}
				if got != rec.file(i, f.Bytes) || got.Size != f.Bytes {
					bad.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return !bad.Load()
}

// dirAt keeps the directory of the last file asked for open.
type dirAt struct {
	rel string // slash path of the directory open, with its trailing slash
	fd  int    // -1: none (or it could not be opened)
	ok  bool   // rel and fd are set
}

// open returns a descriptor of the directory of the slash path rel under
// root, and rel's last element; -1 when it cannot be opened.
func (d *dirAt) open(root, rel string) (int, string) {
	dir, name := path.Split(rel)
	if d.ok && dir == d.rel {
		return d.fd, name
	}
	d.close()
	fd, err := unix.Open(filepath.Join(root, filepath.FromSlash(dir)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	d.rel, d.fd, d.ok = dir, fd, true
	return fd, name
}

func (d *dirAt) close() {
	if d.ok && d.fd >= 0 {
		unix.Close(d.fd)
	}
	d.ok = false
}
