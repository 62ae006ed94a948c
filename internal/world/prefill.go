package world

import (
	"io/fs"
	"slices"
	"strings"
	"syscall"

	"github.com/apodex/apodex/internal/watch"
)

// prefill is the rollout workspace's tree as the store knows it, for its
// watch (watch.Prefill): the seal's directories under workspace/, and
// every workspace file with the stat the seal recorded and the hash the
// manifest did, so the watch of a fresh overlay (whose lower layer shows
// the store's inodes, sizes, mtimes and modes) stats and reads no file
// before the first command. Every entry's owner is its directory's: the
// seal proved there is one owner, and the lower layer maps it as one. It
// trusts the seal as far as Intact does and no further (see known): a
// rollout's result counts only once Intact proved every file. False when
// the seal is a v1 one (no blocks) or entries have several owners.
func (w *World) prefill() (watch.Prefill, bool) {
	rec := w.seal()
	if rec == nil || rec.blocks == nil || rec.owner.Single == 0 {
		return watch.Prefill{}, false
	}
	var dirs []string
	for _, d := range rec.dirs {
		if rel, ok := strings.CutPrefix(d.rel, "workspace/"); ok {
			dirs = append(dirs, rel)
		}
	}
	lo, _ := slices.BinarySearchFunc(w.Files, "workspace/", func(f File, p string) int { return strings.Compare(f.Path, p) })
	files := func(yield func(string, watch.Entry, watch.Sum) bool) {
		for i := lo; i < len(w.Files); i++ {
			f, st := w.Files[i], rec.files[i]
			rel, ok := strings.CutPrefix(f.Path, "workspace/")
			if !ok {
				return
			}
			e := watch.Entry{Size: st.Size, Blocks: rec.blocks[i], Ino: uint64(st.Ino), MTime: st.MTime, Mode: modeOf(uint32(st.Mode))}
			if !yield(rel, e, watch.Sum(f.SHA256)) {
				return
			}
		}
	}
	return watch.Prefill{Dirs: dirs, Files: files, DirOwner: true}, true
}

// modeOf is the fs.FileMode of a regular file's or directory's stat mode
// (what a world holds), as os.Lstat gives it.
func modeOf(sm uint32) fs.FileMode {
	m := fs.FileMode(sm & 0o777)
	switch sm & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFREG:
	default:
		m |= fs.ModeIrregular
	}
	if sm&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if sm&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if sm&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
