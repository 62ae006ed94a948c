package world

import (
	"slices"
	"strings"

	"github.com/apodex/apodex/internal/watch"
)

// prefill is the rollout workspace's tree as the store knows it, for its
// watch (watch.Prefill): the seal's directories under workspace/, and
// every workspace file with the stat the seal recorded and the hash the
// manifest did, so the watch of a fresh overlay (whose lower layer shows
// the store's inodes, sizes, mtimes and modes) stats and reads no file
// before the first command. Every file has the owner the first one shows:
// the seal proved there is one owner, and the lower layer maps it as one. It
// trusts the seal as far as Intact does and no further (see known): a
// rollout's result counts only once Intact proved every file. False when
// the seal is a v1 one (no blocks) or entries have several owners.
func (w *World) prefill() (watch.Prefill, bool) {
	rec := w.seal()
	if rec == nil || !rec.v2 || rec.owner.Single == 0 {
		return watch.Prefill{}, false
	}
	var dirs []string
	index := map[string]int{"": -1} // directory -> its index in dirs
	for _, d := range rec.dirs {
		if rel, ok := strings.CutPrefix(d.rel, "workspace/"); ok {
			index[rel] = len(dirs)
			dirs = append(dirs, rel)
		}
	}
	// Each directory's files, by index in w.Files (path order is name
	// order within a directory); the root's last.
	// Two passes: each directory's count, then its files, all in one
	// slice (no slice grown per directory).
	byDir := make([][]int32, len(dirs)+1)
	lo, _ := slices.BinarySearchFunc(w.Files, "workspace/", func(f File, p string) int { return strings.Compare(f.Path, p) })
	count := make([]int, len(byDir))
	each := func(f func(i, at int)) bool {
		last, at := "\x00", 0
		for i := lo; i < len(w.Files) && strings.HasPrefix(w.Files[i].Path, "workspace/"); i++ {
			dir, _ := splitDir(w.Files[i].Path[len("workspace/"):])
			if dir != last {
				k, ok := index[dir]
				if !ok {
					return false // a file in no directory of the seal
				}
				last, at = dir, (k+len(byDir))%len(byDir)
			}
			f(i, at)
		}
		return true
	}
	if !each(func(_, at int) { count[at]++ }) {
		return watch.Prefill{}, false
	}
	all, start := make([]int32, 0, sumInts(count)), 0
	for at, n := range count {
		byDir[at] = all[start : start : start+n]
		start += n
	}
	each(func(i, at int) { byDir[at] = append(byDir[at], int32(i)) })
	files := func(dir int, yield func(string, watch.Entry, watch.Sum) bool) {
		for _, i := range byDir[(dir+len(byDir))%len(byDir)] {
			f, st := w.Files[i], rec.file(int(i), w.Files[i].Bytes)
			_, name := splitDir(f.Path)
			e := watch.Entry{Size: st.Size, Blocks: rec.block(int(i)), Ino: uint64(st.Ino), MTime: st.MTime, Mode: watch.ModeOf(uint32(st.Mode))}
			if !yield(name, e, watch.Sum(f.SHA256)) {
				return
			}
		}
	}
	return watch.Prefill{Dirs: dirs, Files: files, OneOwner: true}, true
}

func sumInts(n []int) (s int) {
	for _, k := range n {
		s += k
	}
	return s
}

// splitDir is a slash path's directory ("" for none) and last element.
func splitDir(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}
