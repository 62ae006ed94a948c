package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
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
	if err := record.Cut(dir, n); err != nil { // as a kill after line n leaves it
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

// appendChained appends line (an event without prev) as apodex would
// append it: chained, the head naming it.
func appendChained(t *testing.T, dir, line string) {
	t.Helper()
	line = strings.Replace(line, `,"agent":"main"`, `,"agent":"main","prev":"sha256:`+strings.Repeat("0", 64)+`"`, 1)
	appendLine(t, dir, line)
	if err := record.Reseal(dir); err != nil {
		t.Fatal(err)
	}
}

// Bad records get a clear answer and lose nothing.
func TestResumeRefusesWhatItCannotKeep(t *testing.T) {
	t.Run("unknown type", func(t *testing.T) {
		home, dir := stoppedExample(t, 6)
		appendChained(t, dir, `{"seq":7,"time":"2026-01-01T00:00:00Z","type":"hologram","agent":"main","x":1}`)
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

// Issue #25: a record edited by hand is refused by every command that acts
// on it, naming the first bad seq and its line; verify --record says
// whether a record is as apodex wrote it; a record from before the chain
// is said to be unchecked.
func TestTamperedRecordRefused(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	code, out, errOut := cli(t, "run", "--home", home, "--provider", "scripted", "--json", "--quiet",
		"--script", "../../examples/csv-sum/script.json", "--task", "../../examples/csv-sum/task.yaml")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, out, errOut)
	}
	s := decodeSummary(t, out)
	events := runtest.Events(t, s.RunDir)
	n := len(events)
	if code, out, _ := cli(t, "verify", "--record", "--home", home, s.RunID); code != 0 ||
		out != fmt.Sprintf("record of run %s: %d events, hash-chained from seq 1, events.head at seq %d: intact\n", s.RunID, n, n) {
		t.Fatalf("verify --record of an intact run: exit %d: %q", code, out)
	}
	p := filepath.Join(s.RunDir, record.EventsFile)
	orig, _ := os.ReadFile(p)

	// A tool result edited in the middle: the chain breaks at the next line.
	var seq int64
	for _, e := range events {
		if e.Type == record.TypeToolResult && strings.Contains(string(e.Raw), "sum=6637.00") {
			seq = e.Seq
		}
	}
	os.WriteFile(p, bytes.Replace(orig, []byte("sum=6637.00"), []byte("sum=1.00"), 1), 0o644)
	want := fmt.Sprintf("the record was changed after it was written: line %d (seq %d): its prev is not the hash of line %d (seq %d): seq %d was edited", seq+1, seq+1, seq, seq, seq)
	for _, args := range [][]string{
		{"verify", "--record", "--home", home, s.RunID},
		{"replay", "--home", home, s.RunID},
		{"export", "--home", home, "--format", "chat", s.RunID},
	} {
		code, out, errOut := cli(t, args...)
		if code != cmdline.ExitFailed || !strings.Contains(out+errOut, want) {
			t.Errorf("%s of an edited record: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
	if code, out, _ := cli(t, "show", "--home", home, s.RunID); code != 0 || !strings.Contains(out, "trainable:   no — "+want) {
		t.Errorf("show of an edited record:\n%s", out)
	}

	// The run_finished dropped (the red team's case): the run looks stopped,
	// and resume refuses it, naming the missing seq; nothing is written.
	lines := bytes.SplitAfter(orig, []byte("\n"))
	cut := bytes.Join(lines[:n-1], nil)
	os.WriteFile(p, cut, 0o644)
	code, out, errOut = cli(t, "resume", "--home", home, "--quiet", s.RunID)
	if code != cmdline.ExitFailed || !strings.Contains(errOut, fmt.Sprintf("line %d (seq %d): the record ends at seq %d, but events.head says seq %d was written", n, n, n-1, n)) {
		t.Errorf("resume of a record whose run_finished was dropped: exit %d\n%s%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(after, cut) {
		t.Error("the refused resume wrote to the record")
	}

	// A record from before the chain: no prev, no head. It reads, and
	// verify --record says it is not checked.
	old := regexp.MustCompile(`,"prev":"sha256:[0-9a-f]{64}"`).ReplaceAll(orig, nil)
	os.WriteFile(p, old, 0o644)
	os.Remove(filepath.Join(s.RunDir, record.HeadFile))
	if code, out, _ := cli(t, "verify", "--record", "--home", home, s.RunID); code != 0 || !strings.Contains(out, "no hash chain (written by an apodex from before the chain): not checked") {
		t.Errorf("verify --record of an unchained record: exit %d: %q", code, out)
	}
	if code, out, errOut := cli(t, "export", "--home", home, "--format", "chat", s.RunID); code != 0 {
		t.Errorf("export of an unchained record: exit %d\n%s%s", code, out, errOut)
	}

	// A garbled first line, in a stopped run and in a finished one, is
	// named by its number.
	os.WriteFile(p, append([]byte("{garbled"), orig[bytes.IndexByte(orig, '\n'):]...), 0o644)
	for _, args := range [][]string{{"replay"}, {"show"}, {"verify", "--record"}, {"export", "--format", "chat"}} {
		if code, out, errOut := cli(t, append(append(args, "--home", home), s.RunID)...); code == 0 || !strings.Contains(errOut, "line 1 (seq 1 expected) is garbled") {
			t.Errorf("%s of a record whose first line is garbled: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
	os.WriteFile(p, append([]byte("{garbled"), cut[bytes.IndexByte(cut, '\n'):]...), 0o644)
	if code, out, errOut := cli(t, "resume", "--home", home, "--quiet", s.RunID); code == 0 || !strings.Contains(errOut, "line 1 (seq 1 expected) is garbled") {
		t.Errorf("resume of a stopped run whose first line is garbled: exit %d\n%s%s", code, out, errOut)
	}
}
