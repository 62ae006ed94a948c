package stage

import (
	"encoding/hex"
	"github.com/apodex/apodex/internal/hostfs"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
)

// CopyInputs copies the regular files of src into dst and returns them hashed
// by plane path. Symlinks and special files are not followed: a link could
// point anywhere on the host, and inputs must be a closed, rebuildable state.
func CopyInputs(src, dst string) ([]record.FileEntry, error) {
	entries := []record.FileEntry{}
	if src == "" {
		return entries, nil
	}
	src, err := filepath.EvalSymlinks(src) // the root may be a link; what is inside is not followed
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		if err := hostfs.CopyNew(p, target); err != nil {
			return err
		}
		sum, n, err := workspace.HashFile(target)
		if err != nil {
			return err
		}
		entries = append(entries, record.FileEntry{Path: "/inputs/" + filepath.ToSlash(rel), SHA256: sum, Bytes: n})
		return nil
	})
	return entries, err
}

// ProducedFiles lists the regular files in /workspace and /outputs at the end
// of the run, hashed: the first record.MaxFilesListed of them (/outputs
// first), and how many more there were (counted, not hashed). A plane the
// run's Set watches is listed from its tree, whose hashes are current
// (only files changed since they were hashed are read: a world's
// untouched files never are); another is walked and hashed. With stored
// (a world rollout's: world.Rollout.Stored), a /workspace file stored
// says is the world's own is not listed but counted in unchanged: the
// world's manifest lists it. From a prefilled tree that costs what the
// rollout touched, not the world's size (watch.Tree.Changed).
func ProducedFiles(ws *workspace.FS, stored func(watch.File) bool) (files []record.FileEntry, omitted, unchanged int) {
	files = []record.FileEntry{}
	for _, root := range []struct{ plane, host string }{{"/outputs", ws.Outputs}, {"/workspace", ws.Workspace}} { // deliverables first
		same := stored
		if root.plane != "/workspace" {
			same = nil
		}
		if t := treeOf(ws, root.host); t != nil {
			var listed []watch.File
			var more, kept int
			if same != nil {
				listed, more, kept = t.Changed(record.MaxFilesListed-len(files), same)
			} else {
				listed, more = t.Files(record.MaxFilesListed - len(files))
			}
			files = slices.Grow(files, len(listed)) // 10,000 entries at most, not grown by doubling
			for _, f := range listed {
				if f.Hashed {
					files = append(files, record.FileEntry{Path: root.plane + "/" + f.Rel, SHA256: f.Sum.String(), Bytes: f.Size})
				}
			}
			omitted += more
			unchanged += kept
			continue
		}
		filepath.WalkDir(root.host, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if len(files) >= record.MaxFilesListed && same == nil {
				omitted++
				return nil
			}
			rel, _ := filepath.Rel(root.host, p)
			sum, n, err := workspace.HashFile(p)
			if err != nil {
				return nil
			}
			if same != nil {
				f := watch.File{Rel: filepath.ToSlash(rel), Size: n, Hashed: true}
				hex.Decode(f.Sum[:], []byte(strings.TrimPrefix(sum, workspace.HashPrefix)))
				switch {
				case same(f):
					unchanged++
					return nil
				case len(files) >= record.MaxFilesListed:
					omitted++
					return nil
				}
			}
			files = append(files, record.FileEntry{Path: root.plane + "/" + filepath.ToSlash(rel), SHA256: sum, Bytes: n})
			return nil
		})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, omitted, unchanged
}

// treeOf is the run's tree of the plane dir, if its Set watches it.
func treeOf(ws *workspace.FS, dir string) *watch.Tree {
	if ws.Watch == nil || dir == "" {
		return nil
	}
	return ws.Watch.Lookup(dir)
}
