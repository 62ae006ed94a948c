package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOfferNamesWhatIsThereAndWhatIsNot(t *testing.T) {
	bin, lib := t.TempDir(), t.TempDir()
	for _, n := range []string{"python3", "awk", "sed"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(bin, "node"), []byte("not executable"), 0o644)
	os.MkdirAll(filepath.Join(lib, "python3.11", "dist-packages", "numpy"), 0o755)
	got := offerIn([]string{bin}, lib)
	for _, want := range []string{"interpreters and compilers: python3;", "tools: awk, sed.", "Not installed: python, node, jq, sqlite3, git.", "standard library: numpy."} {
		if !strings.Contains(got, want) {
			t.Errorf("offer lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "pandas") {
		t.Errorf("offer names a package that is not there:\n%s", got)
	}
}

func TestOfferOfThisHostIsCached(t *testing.T) {
	a := SandboxOffer()
	if a == "" || SandboxOffer() != a {
		t.Fatalf("offer %q", a)
	}
}
