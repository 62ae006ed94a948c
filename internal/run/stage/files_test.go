package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/record"
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
	files, omitted := ProducedFiles(&workspace.FS{Workspace: ws, Outputs: out})
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
