package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CreateView is Create for a view that is never merged back, such as a
// world rollout over its immutable store: the overlay is mounted without
// recording a baseline (no scan of lower), so it costs a few directory
// creations and one mount whatever the size of lower. Where overlayfs
// cannot be mounted it falls back to a copy, as Create does. Merge on a
// view reports every file as changed by someone else; use Changes.
func (m *Manager) CreateView(lower, root, name string) (*Worktree, error) {
	w, err := m.prepare(lower, root, name)
	if err != nil {
		return nil, err
	}
	if err := w.mountView(); err != nil {
		w.Fallback = err.Error()
		if rerr := removeTree(w.base); rerr != nil {
			return nil, fmt.Errorf("worktree: clean up after a failed mount: %w", rerr)
		}
		return w.copyIn()
	}
	return w, nil
}

func (w *Worktree) mountView() error {
	if strings.ContainsAny(w.shared+w.base, `,:\`) {
		return fmt.Errorf("overlay: a path holds one of , : \\")
	}
	w.upper = filepath.Join(w.base, upperDir)
	work := filepath.Join(w.base, workDir)
	for _, d := range []string{w.upper, work, w.Dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	lower := w.shared
	w.m.mu.Lock()
	o := w.m.viewOwner
	w.m.mu.Unlock()
	if o != nil && os.Geteuid() == 0 {
		if l, err := idmapLower(w.shared, w.base, o[0], o[1]); err != nil {
			w.IDMap = "none: " + err.Error()
		} else {
			lower, w.IDMap = l, IDMapped
			if err := os.Lchown(w.upper, o[0], o[1]); err != nil {
				return err
			}
		}
	}
	if err := mount(lower, w.upper, work, w.Dir); err != nil {
		if lower != w.shared {
			unmount(lower)
		}
		return fmt.Errorf("overlay: %w", err)
	}
	w.Kind, w.baseline = Overlay, newBaseline()
	return nil
}

// IDMapped is Worktree.IDMap for a view whose lower layer is bound through
// an idmapped mount.
const IDMapped = "idmapped"

// OwnViews makes the views created from now on show their lower layer's
// files as owned by uid:gid when the runtime is root (the sandbox uid
// commands run as): an idmapped, read-only bind of lower (Linux 5.19 or
// later, a filesystem that supports idmapped mounts) is the overlay's lower
// layer, so the sandbox can create, rename and remove files without a
// chown of each (which would copy every file up). Where it cannot be made
// the view shows the real owners, Worktree.IDMap says why, and the sandbox
// falls back to giving each entry to its uid.
func (m *Manager) OwnViews(uid, gid int) {
	m.mu.Lock()
	m.viewOwner = &[2]int{uid, gid}
	m.mu.Unlock()
}

// Upper is the overlay's upper directory, where every changed file is kept
// whole; "" for a copy.
func (w *Worktree) Upper() string { return w.upper }

// Detach unmounts an overlay view (and its lower bind) but keeps its upper
// layer, whose path it returns, until Close: what the view changed, to be
// moved out of it. Nothing shows through Dir any more.
func (w *Worktree) Detach() (string, error) {
	if w.Kind != Overlay || w.closed {
		return "", fmt.Errorf("worktree: detach: not a mounted overlay")
	}
	w.m.set.ForgetUnder(w.base)
	mps, err := mountsUnder(w.base)
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	for _, mp := range mps {
		if err := unmount(mp); err != nil {
			return "", fmt.Errorf("worktree: unmount %s: %w", mp, err)
		}
	}
	return w.upper, nil
}

// IsOpaque tells an overlay upper directory that hides everything below it
// in the lower one.
func IsOpaque(dir string) bool { return isOpaque(dir) }
