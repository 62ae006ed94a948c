package jetstream

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUnpackDirLeavesNothingOnBadData: a record read that starts
// mid-object (as after the loss of a node) is refused and leaves no
// partial directory behind, so fetching it again starts clean.
func TestUnpackDirLeavesNothingOnBadData(t *testing.T) {
	parent := t.TempDir()
	dst := filepath.Join(parent, "20261202-000000-abcdef")
	for _, data := range [][]byte{nil, []byte("not gzip at all"), {0x1f, 0x8b, 0x08, 0, 0}} {
		if err := unpackDir(bytes.NewReader(data), dst, nil); err == nil {
			t.Fatalf("unpackDir(%q) took it", data)
		}
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			t.Fatalf("unpackDir(%q) left %s behind", data, ents[0].Name())
		}
	}
}
