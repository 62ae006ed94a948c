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
	if err := mount(w.shared, w.upper, work, w.Dir); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	w.Kind, w.baseline = Overlay, newBaseline()
	return nil
}

// Upper is the overlay's upper directory, where every changed file is kept
// whole; "" for a copy.
func (w *Worktree) Upper() string { return w.upper }
