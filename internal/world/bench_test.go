package world_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/worktree"
	"github.com/apodex/apodex/internal/world"
)

// bigWorld stores a world with n files under plane (workspace or inputs).
func bigWorld(b *testing.B, plane string, n int) *world.World {
	b.Helper()
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "world.yaml"), []byte("name: big\nfamily: code\nobjective: Look around.\n"), 0o644)
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, plane, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	w, _, err := world.NewStore(b.TempDir()).Build(dir)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkStage1000 measures a fresh rollout sandbox from a stored
// 1,000-file world: Stage alone, b.N times into fresh run directories
// (the overlays are finished after the timed loop). Under workspace/ the
// files are behind one overlay mount; under inputs/ each is a hard link.
func BenchmarkStage1000(b *testing.B) {
	for _, plane := range []string{"workspace", "inputs"} {
		b.Run(plane, func(b *testing.B) {
			w := bigWorld(b, plane, 1000)
			dirs := runDirs(b, w, b.N)
			rs := make([]*world.Rollout, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := world.Stage(w, dirs[i], nil)
				if err != nil {
					b.Fatal(err)
				}
				rs[i] = r
			}
			b.StopTimer()
			for _, r := range rs {
				r.Finish()
			}
		})
	}
}

// BenchmarkFinish measures keeping the terminal workspace of a rollout
// that changed one file of a world of n files, and unmounting: "base",
// a run in the world's home, which keeps the change and its base
// (runfiles.Base); "linked", a run elsewhere, whose tree is filled with a
// hard link per untouched file, as every run's was before issue 31.
func BenchmarkFinish(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		w := bigWorld(b, "workspace", n)
		for _, layout := range []string{"base", "linked"} {
			b.Run(fmt.Sprintf("%d/%s", n, layout), func(b *testing.B) {
				dirs := runDirs(b, w, b.N)
				if layout == "linked" {
					dirs = runDirs(b, nil, b.N)
				}
				rs := make([]*world.Rollout, b.N)
				for i := range rs {
					r, err := world.Stage(w, dirs[i], nil)
					if err != nil {
						b.Fatal(err)
					}
					os.WriteFile(filepath.Join(r.Workspace, "d00", "f0000.txt"), []byte("changed\n"), 0o644)
					r.Intact() // the per-file check Stage began ends before the run's end, as in a run
					rs[i] = r
				}
				b.ResetTimer()
				for _, r := range rs {
					if err := r.Finish(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// runDirs makes n fresh run directories: in w's home (<home>/runs/…), or
// anywhere else when w is nil.
func runDirs(b *testing.B, w *world.World, n int) []string {
	root := b.TempDir()
	if w != nil {
		root = filepath.Join(filepath.Dir(filepath.Dir(w.Dir)), "runs")
	}
	out := make([]string, n)
	for i := range out {
		d, err := os.MkdirTemp(root, "r-")
		if err != nil {
			os.MkdirAll(root, 0o755)
			if d, err = os.MkdirTemp(root, "r-"); err != nil {
				b.Fatal(err)
			}
		}
		out[i] = d
		os.MkdirAll(filepath.Join(out[i], "workspace"), 0o755)
	}
	return out
}

// BenchmarkRolloutStart measures what a rollout does before its first
// command with a stored world of n workspace files: load the world from
// the store (Get), stage it (Stage) and make the workspace's watch (its
// first For, filled from the manifest and seal). Each iteration is a
// fresh run directory; the per-file check Stage starts beside the first
// commands and finishing are not timed.
func BenchmarkRolloutStart(b *testing.B) {
	for _, n := range []int{1, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w := bigWorld(b, "workspace", n)
			st := &world.Store{Dir: filepath.Dir(w.Dir)}
			dirs := runDirs(b, w, b.N)
			rs := make([]*world.Rollout, 0, b.N)
			wm := worktree.NewManager(nil)
			defer wm.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				loaded, err := st.Get(w.ID)
				if err != nil {
					b.Fatal(err)
				}
				r, err := world.Stage(loaded, dirs[i], wm)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := wm.Watch().For(r.Workspace); err != nil {
					b.Fatal(err)
				}
				rs = append(rs, r)
				b.StopTimer()
				r.Intact() // the per-file check runs beside the first commands: not timed
				b.StartTimer()
			}
			b.StopTimer()
			for _, r := range rs {
				wm.Watch().Forget(r.Workspace)
				r.Finish()
			}
		})
	}
}
