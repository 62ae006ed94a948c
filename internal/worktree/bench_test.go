package worktree

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/procmem"
)

// BenchmarkCreateClose measures a worktree's setup and teardown on a
// workspace of 1,000 files of 1 KiB in 10 directories.
func BenchmarkCreateClose(b *testing.B) {
	shared := filepath.Join(b.TempDir(), "shared")
	for i := range 1000 {
		write(b, filepath.Join(shared, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("f%03d.txt", i)), strings.Repeat("x", 1024))
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			root := filepath.Join(b.TempDir(), "root")
			defer Cleanup(root)
			i := 0
			for b.Loop() {
				w, err := k.create(shared, root, fmt.Sprint(i))
				if err != nil {
					b.Fatal(err)
				}
				if w.Kind != k.name {
					w.Close()
					b.Skipf("overlay unavailable: %s", w.Fallback)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkDispatchMerge is a subagent's worktree over a shared workspace
// of 0 to 100,000 files: create (dispatch), one file written, merge, close.
//
//	go test -run '^$' -bench DispatchMerge -benchtime 10x ./internal/worktree/
func BenchmarkDispatchMerge(b *testing.B) {
	for _, n := range []int{0, 2000, 20000, 100000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			shared := filepath.Join(b.TempDir(), "shared")
			write(b, filepath.Join(shared, "keep"), "k")
			for i := range n {
				write(b, filepath.Join(shared, fmt.Sprintf("d%04d", i/100), fmt.Sprintf("f%03d.txt", i%100)), "0123456789abcdef")
			}
			root := filepath.Join(b.TempDir(), "root")
			defer Cleanup(root)
			// The first Create indexes the shared workspace (once per
			// process); it is outside the timing.
			w, err := testManager.Create(shared, root, "warm")
			if err != nil {
				b.Fatal(err)
			}
			w.Close()
			i := 0
			for b.Loop() {
				w, err := testManager.Create(shared, root, fmt.Sprint(i))
				if err != nil {
					b.Fatal(err)
				}
				if w.Kind != Overlay {
					b.Skipf("overlay unavailable: %s", w.Fallback)
				}
				write(b, filepath.Join(w.Dir, fmt.Sprintf("new%d.txt", i)), "new")
				rep, err := w.Merge()
				if err != nil || len(rep.Conflicts) > 0 {
					b.Fatalf("merge: %v %+v", err, rep)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(procmem.PeakRSS(), "peak-RSS-MiB")
		})
	}
}
