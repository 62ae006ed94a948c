package worktree

import (
	"io/fs"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
)

// sharedIndex keeps what scan would give for a shared directory current
// from kernel change notification (package watch): a Create looks again
// only at the entries that changed since the last one, not at every file.
type sharedIndex struct {
	mu     sync.Mutex
	sub    *watch.Sub
	hashes map[string]cached // regular files
	out    map[string]string // as scan returns it
}

var indexes sync.Map // absolute dir -> *sharedIndex

// scanShared is scan(dir) at a cost that grows with what changed in dir
// since the last call; without a watch it is scan with the stat cache.
func scanShared(dir string) (map[string]string, error) {
	v, _ := indexes.LoadOrStore(dir, &sharedIndex{})
	ix := v.(*sharedIndex)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.sub == nil {
		t, err := watch.For(dir)
		if err != nil {
			return scan(dir, cacheFor(dir))
		}
		ix.sub, ix.hashes, ix.out = t.Subscribe(), map[string]cached{}, map[string]string{}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, rel := range ix.sub.Take() {
		if rel == "." {
			continue
		}
		fi, err := root.Lstat(rel)
		switch {
		case err == nil && fi.Mode().IsRegular():
			k := statKey{fi.Size(), fi.ModTime().UnixNano(), changeTime(fi), inode(fi)}
			e, ok := ix.hashes[rel]
			if !ok || e.key != k || k.ctime >= e.at-int64(racySlack) || k.mtime >= e.at-int64(racySlack) {
				h, _, err := workspace.HashIn(root, rel)
				if err != nil {
					ix.forget(rel) // unreadable: treated as changed by someone else
					continue
				}
				e = cached{key: k, hash: h, at: time.Now().UnixNano()}
			}
			ix.hashes[rel], ix.out[rel] = e, e.hash
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(rel)
			if err != nil {
				ix.forget(rel)
				continue
			}
			delete(ix.hashes, rel)
			ix.out[rel] = linkPrefix + target
		default:
			ix.forget(rel)
		}
	}
	return maps.Clone(ix.out), nil
}

func (ix *sharedIndex) forget(rel string) {
	delete(ix.hashes, rel)
	delete(ix.out, rel)
}
