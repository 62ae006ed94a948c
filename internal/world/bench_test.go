package world_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
// 1,000-file world: Stage only (Finish, which keeps the terminal
// workspace, is outside the timer and measured by BenchmarkFinish1000).
func BenchmarkStage1000(b *testing.B) {
	for _, plane := range []string{"workspace", "inputs"} {
		b.Run(plane, func(b *testing.B) {
			w := bigWorld(b, plane, 1000)
			root := b.TempDir()
			kind := ""
			for i := 0; i < b.N; i++ {
				runDir := filepath.Join(root, fmt.Sprint(i))
				b.StopTimer()
				os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
				b.StartTimer()
				r, err := world.Stage(w, runDir)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				kind = r.Record.Sandbox
				r.Finish()
				os.RemoveAll(runDir)
				b.StartTimer()
			}
			b.Logf("workspace kind %s", kind)
		})
	}
}

// BenchmarkFinish1000 measures keeping a 1,000-file terminal workspace.
func BenchmarkFinish1000(b *testing.B) {
	w := bigWorld(b, "workspace", 1000)
	root := b.TempDir()
	for i := 0; i < b.N; i++ {
		runDir := filepath.Join(root, fmt.Sprint(i))
		b.StopTimer()
		os.MkdirAll(filepath.Join(runDir, "workspace"), 0o755)
		r, err := world.Stage(w, runDir)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r.Finish()
		b.StopTimer()
		os.RemoveAll(runDir)
		b.StartTimer()
	}
}
