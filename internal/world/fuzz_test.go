package world_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/world"
)

// FuzzLoad feeds world.yaml arbitrary bytes: Load returns a manifest or an
// error, never panics, and a loaded manifest always has a name, a known
// family and a canonical form.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(manifest))
	f.Add([]byte("name: x\nfamily: code\nobjective: y\ngenerator: {name: code, version: \"1\", seed: 3, level: 2}\ndifficulty: {a: 1}\n"))
	f.Add([]byte("name: [\n"))
	f.Add([]byte("family: file\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "inputs"), 0o755)
		os.WriteFile(filepath.Join(dir, "inputs", "a.txt"), []byte("x"), 0o644)
		if err := os.WriteFile(filepath.Join(dir, "world.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := world.Load(dir)
		if err != nil {
			return
		}
		if m.Name == "" || m.Contract == nil || len(m.Canonical) == 0 {
			t.Fatalf("loaded an incomplete manifest: %+v", m)
		}
		switch m.Family {
		case world.FamilyFile, world.FamilySearch, world.FamilyCode:
		default:
			t.Fatalf("loaded family %q", m.Family)
		}
	})
}
