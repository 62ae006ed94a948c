package world

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Get takes the list from .files and the rest of .world.json from around
// its list; without .files (a world stored before it), from .world.json.
func TestGetReadsTheBinaryList(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, ManifestFile), []byte("name: t\nfamily: code\nobjective: x\ndifficulty: {files: 3}\n"), 0o644)
	for _, p := range []string{"inputs/a.txt", "workspace/b/c.py", "workspace/d.py"} {
		os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(src, p), []byte(p), 0o644)
	}
	st := NewStore(t.TempDir())
	built, _, err := st.Build(src)
	if err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(built.Dir, infoFile)
	raw, _ := os.ReadFile(info)
	var want World
	json.Unmarshal(raw, &want)
	check := func(what string) {
		t.Helper()
		w, err := st.Get(built.ID)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !reflect.DeepEqual(w.Files, want.Files) || w.ID != want.ID || w.Name != want.Name || w.Bytes != want.Bytes || w.Diff["files"] != 3 {
			t.Errorf("%s: got %+v, want %+v", what, w, want)
		}
		if err := w.Intact(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	check("as stored")
	// The list in .world.json is not what Get reads when .files is there.
	os.Chmod(built.Dir, 0o755)
	os.Chmod(info, 0o644)
	var emptied map[string]any
	json.Unmarshal(raw, &emptied)
	emptied["files"] = []any{}
	b, _ := json.MarshalIndent(emptied, "", "  ")
	os.WriteFile(info, b, 0o444)
	check("with .world.json's list emptied")
	os.WriteFile(info, raw, 0o444)
	os.Remove(filepath.Join(built.Dir, listFile))
	check("without .files")
}
