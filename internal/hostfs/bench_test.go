package hostfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/hostfs"
)

// BenchmarkWriteFile measures one confined write (parents checked, a
// temporary file renamed into place) against a plain os.WriteFile of the
// same 4 KiB file three directories deep.
//
//	go test -run XXX -bench WriteFile ./internal/hostfs/
func BenchmarkWriteFile(b *testing.B) {
	data := make([]byte, 4<<10)
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Run("hostfs", func(b *testing.B) {
		d, err := hostfs.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for b.Loop() {
			if err := d.WriteFile("a/b/c/f", data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os", func(b *testing.B) {
		for b.Loop() {
			if err := os.WriteFile(filepath.Join(dir, "a/b/c/g"), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
}
