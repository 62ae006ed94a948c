package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// stoppedExample runs examples/csv-sum to its end, then cuts its record
// back to its first n events (n small: before anything was written) and
// empties /outputs, as a run killed there leaves it.
func stoppedExample(t *testing.T, n int) (home, dir string) {
	t.Helper()
	runtest.NeedSandbox(t)
	home = t.TempDir()
	code, _, stderr := cli(t, "run", "--home", home, "--provider", "scripted", "--script", "../../examples/csv-sum/script.json",
		"--task", "../../examples/csv-sum/task.yaml", "--quiet")
	if code != 0 {
		t.Fatalf("the example exited %d: %s", code, stderr)
	}
	dir = onlyRun(t, home)
	p := filepath.Join(dir, record.EventsFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if err := os.WriteFile(p, []byte(strings.Join(lines[:n], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sum.txt", "report.md"} {
		os.Remove(filepath.Join(dir, "outputs", name))
	}
	return home, dir
}

func appendLine(t *testing.T, dir, line string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, record.EventsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(line + "\n")
}

// Bad records get a clear answer and lose nothing.
func TestResumeRefusesWhatItCannotKeep(t *testing.T) {
	t.Run("unknown type", func(t *testing.T) {
		home, dir := stoppedExample(t, 6)
		appendLine(t, dir, `{"seq":7,"time":"2026-01-01T00:00:00Z","type":"hologram","agent":"main","x":1}`)
		code, _, stderr := cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir))
		if code == 0 || !strings.Contains(stderr, `"hologram" (seq 7)`) {
			t.Fatalf("resume: exit %d, %s", code, stderr)
		}
		code, stdout, stderr := cli(t, "show", "--home", home, filepath.Base(dir))
		if code != 0 || !strings.Contains(stdout, `skipped event seq 7 of type "hologram"`) {
			t.Fatalf("show: exit %d\n%s%s", code, stdout, stderr)
		}
	})
	t.Run("garbled line", func(t *testing.T) {
		home, dir := stoppedExample(t, 6)
		appendLine(t, dir, `{"seq":7,"time":"2026-01-01T00:00:00Z","type":"warni`)
		appendLine(t, dir, `{"seq":8,"time":"2026-01-01T00:00:00Z","type":"warning","agent":"","code":"x","message":"y"}`)
		code, _, stderr := cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir))
		if code == 0 || !strings.Contains(stderr, "line 7") {
			t.Fatalf("resume: exit %d, %s", code, stderr)
		}
	})
	for _, damage := range []string{"missing", "corrupt"} {
		t.Run(damage+" task blob", func(t *testing.T) {
			home, dir := stoppedExample(t, 6)
			rec, err := record.Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			var ce record.Contract
			for _, e := range rec.Events {
				if e.Type == record.TypeContract {
					e.Decode(&ce)
				}
			}
			p, err := record.BlobPath(dir, ce.TaskRef)
			if err != nil {
				t.Fatalf("the contract names no task blob: %+v", ce)
			}
			if damage == "missing" {
				os.Remove(p)
			} else {
				os.WriteFile(p, []byte("objective: something else\n"), 0o644)
			}
			os.RemoveAll(filepath.Join(dir, "task"))
			code, _, stderr := cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir))
			if code == 0 || !strings.Contains(stderr, ce.TaskRef) || !strings.Contains(stderr, damage) {
				t.Fatalf("resume: exit %d, %s", code, stderr)
			}
		})
	}
	t.Run("resumes", func(t *testing.T) {
		home, dir := stoppedExample(t, 6)
		code, stdout, stderr := cli(t, "resume", "--home", home, "--quiet", filepath.Base(dir))
		if code != 0 {
			t.Fatalf("resume of an intact record: exit %d, %s%s", code, stdout, stderr)
		}
	})
}
