package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
)

// run_finished lists at most record.MaxFilesListed files and counts the
// rest, so a large workspace cannot make its line too long to record.
func TestProducedFilesCapped(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	const extra = 7
	for i := range record.MaxFilesListed + extra {
		d := filepath.Join(ws, fmt.Sprintf("d%d", i%100))
		if i < 100 {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, omitted, _ := ProducedFiles(&workspace.FS{Workspace: ws, Outputs: out}, nil)
	if len(files) != record.MaxFilesListed || omitted != extra+1 {
		t.Fatalf("%d files listed, %d omitted; want %d and %d", len(files), omitted, record.MaxFilesListed, extra+1)
	}
	if files[0].Path != "/outputs/report.md" {
		t.Errorf("the deliverable is not listed first: %s", files[0].Path)
	}
	for i := 1; i < len(files); i++ {
		if files[i-1].Path >= files[i].Path {
			t.Fatalf("not sorted at %d: %s, %s", i, files[i-1].Path, files[i].Path)
		}
	}
	if files[0].SHA256 == "" {
		t.Error("listed files are hashed")
	}
}

// A world rollout's plane that no tree watches (the copy fallback) is
// walked and hashed, and stored still keeps the world's own files out of
// the list, counted; /outputs is never asked about.
func TestProducedFilesLeavesTheWorldsOut(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "kept.py"), []byte("k"), 0o644)
	os.WriteFile(filepath.Join(ws, "made.py"), []byte("m"), 0o644)
	os.WriteFile(filepath.Join(out, "kept.py"), []byte("k"), 0o644)
	var keptSum watch.Sum
	files, omitted, unchanged := ProducedFiles(&workspace.FS{Workspace: ws, Outputs: out}, func(f watch.File) bool {
		if f.Rel == "kept.py" && f.Size == 1 {
			keptSum = f.Sum
			return true
		}
		return false
	})
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	if fmt.Sprint(got) != "[/outputs/kept.py /workspace/made.py]" || omitted != 0 || unchanged != 1 {
		t.Errorf("listed %v (+%d), %d unchanged; want /outputs/kept.py and /workspace/made.py, 1", got, omitted, unchanged)
	}
	if keptSum.String() != files[0].SHA256 {
		t.Errorf("stored was asked with the hash %s, the file's is %s", keptSum, files[0].SHA256)
	}
}
