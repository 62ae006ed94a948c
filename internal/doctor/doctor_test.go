package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHomeCheck(t *testing.T) {
	dir := t.TempDir()
	if c := HomeCheck(filepath.Join(dir, "home")); c.Status != OK {
		t.Errorf("a new home: %+v", c)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	c := HomeCheck(filepath.Join(file, "home"))
	if c.Status != Fail || !strings.Contains(c.Fix, "--home") {
		t.Errorf("a home under a file: %+v", c)
	}
	if !Failed([]Check{{Status: OK}, c}) || Failed([]Check{{Status: Warn}, {Status: Skip}}) {
		t.Error("Failed: only failures fail")
	}
}

func TestToolChecks(t *testing.T) {
	cs := ToolChecks()
	if len(cs) != 1 || cs[0].Status == Fail {
		t.Errorf("%+v", cs)
	}
	if cs[0].Status == Warn && !strings.Contains(cs[0].Fix, "apt-get install") {
		t.Errorf("a missing tool without the fix: %+v", cs[0])
	}
}
