package evidenceplane

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/run/stage"
	"github.com/apodex/apodex/internal/workspace"
)

// The corpus (the flag's, else the task's) is copied under
// /inputs/corpus and listed with those paths; a corpus that holds the
// home, or inputs that already have a corpus/ directory, are refused as
// configuration errors before anything is copied.
func TestCopyCorpus(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "docs")
	if err := os.MkdirAll(filepath.Join(src, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "one.txt"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := &workspace.FS{Inputs: filepath.Join(root, "run", "inputs")}
	if err := os.MkdirAll(fsys.Inputs, 0o755); err != nil {
		t.Fatal(err)
	}

	none := ""
	if entries, has, err := CopyCorpus(&none, root, &contract.Contract{}, fsys); err != nil || has || entries != nil {
		t.Fatalf("no corpus: got %v %v %v", entries, has, err)
	}

	dir := "" // the task's corpus key fills it
	entries, has, err := CopyCorpus(&dir, filepath.Join(root, "home"), &contract.Contract{Corpus: src}, fsys)
	if err != nil || !has || dir != src {
		t.Fatalf("task corpus: has %v dir %q err %v", has, dir, err)
	}
	if len(entries) != 1 || entries[0].Path != "/inputs/corpus/a/one.txt" {
		t.Fatalf("entries: %+v", entries)
	}
	if data, err := os.ReadFile(filepath.Join(fsys.Inputs, "corpus", "a", "one.txt")); err != nil || string(data) != "one" {
		t.Fatalf("copied file: %q %v", data, err)
	}

	var ce *stage.ConfigError
	_, _, err = CopyCorpus(&src, filepath.Join(root, "other"), &contract.Contract{}, fsys)
	if !errors.As(err, &ce) {
		t.Fatalf("inputs with a corpus/ already: want a ConfigError, got %v", err)
	}
	fresh := &workspace.FS{Inputs: filepath.Join(root, "run2", "inputs")}
	_, _, err = CopyCorpus(&src, filepath.Join(src, "home"), &contract.Contract{}, fresh)
	if !errors.As(err, &ce) {
		t.Fatalf("corpus holding the home: want a ConfigError, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh.Inputs, "corpus")); !os.IsNotExist(err) {
		t.Fatalf("a refused corpus was copied: %v", err)
	}
	missing := filepath.Join(root, "nope")
	if _, _, err = CopyCorpus(&missing, root, &contract.Contract{}, fresh); !errors.As(err, &ce) {
		t.Fatalf("missing corpus: want a ConfigError, got %v", err)
	}
}
