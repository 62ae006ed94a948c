package crashtest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
)

// apodexBin is the apodex binary built once for the whole package, in
// workDir, which also holds the scenarios' files and uncrashed runs.
var apodexBin, workDir string

// skipReason says why the crash tests cannot run here (no sandbox, no go
// tool); buildErr is a failed build, which fails them.
var (
	skipReason string
	buildErr   error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "apodex-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
	workDir = dir
	if !testing.Short() {
		buildErr = build(filepath.Join(dir, "apodex"))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(bin string) error {
	if _, err := sandbox.New(sandbox.KindAuto); err != nil {
		skipReason = fmt.Sprintf("no bubblewrap sandbox: %v", err)
		return nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		skipReason = fmt.Sprintf("no go tool to build apodex: %v", err)
		return nil
	}
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/apodex/apodex/cmd/apodex")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build apodex: %v\n%s", err, out)
	}
	apodexBin = bin
	return nil
}

// needApodex skips a test without the binary (-short, or no sandbox) and
// fails it when the build itself failed.
func needApodex(t *testing.T) {
	t.Helper()
	switch {
	case testing.Short():
		t.Skip("crash tests start real processes; skipped with -short")
	case buildErr != nil:
		t.Fatal(buildErr)
	case skipReason != "":
		t.Skip(skipReason)
	}
}

// envInt reads a positive integer setting from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envDefault(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
