package crashtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// copyExample copies examples/csv-sum into a fresh directory: the task a
// test deletes once the run has started.
func copyExample(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "csv-sum")
	if out, err := exec.Command("cp", "-r", "../../examples/csv-sum", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the example: %v\n%s", err, out)
	}
	return dst
}

func exampleRun(home, task string) []string {
	return []string{"run", "--home", home, "--provider", "scripted", "--script", filepath.Join(task, "script.json"),
		"--task", filepath.Join(task, "task.yaml"), "--quiet"}
}

// lastEvent decodes the last complete event of the run's record.
func lastEvent(w *watch) record.Event {
	lines := strings.Split(strings.TrimSuffix(string(w.data), "\n"), "\n")
	var e record.Event
	json.Unmarshal([]byte(lines[len(lines)-1]), &e)
	e.Raw = []byte(lines[len(lines)-1])
	return e
}

// killWhen runs the child until stop holds (with the child frozen), kills
// it there and returns the run directory.
func killWhen(t *testing.T, c *child, home string, stop func(w *watch) bool) (string, *watch) {
	t.Helper()
	dir, w, ok := tryKillWhen(t, c, home, stop)
	if !ok {
		t.Fatalf("the run ended before the kill point:\n%s", c.output())
	}
	return dir, w
}

// tryKillWhen is killWhen reporting, instead of failing, that the run
// ended before stop held.
func tryKillWhen(t *testing.T, c *child, home string, stop func(w *watch) bool) (string, *watch, bool) {
	t.Helper()
	var dir string
	var w *watch
	ok := c.runUntil(t, aimedSlice, func() bool {
		if dir == "" {
			if dir = findRun(home); dir == "" {
				return false
			}
			w = newWatch(dir)
		}
		if err := w.read(); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return w.lines() > 0 && stop(w)
	})
	if !ok {
		return dir, w, false
	}
	c.kill()
	w.read()
	return dir, w, true
}

// killAfterSaying starts the example run, sends it text once its record
// has 4 events and kills it when stop holds. A run can end before the
// message is applied (a fast machine, a slow one for the message): then it
// starts again, up to 5 times, as the aimed kills do.
func killAfterSaying(t *testing.T, text string, stop func(w *watch) bool) (task, home, dir string, w *watch) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		task = copyExample(t)
		home = t.TempDir()
		c := startChild(t, exampleRun(home, task)...)
		said := false
		var ok bool
		dir, w, ok = tryKillWhen(t, c, home, func(w *watch) bool {
			if !said && w.lines() >= 4 {
				said = true
				if s := startChild(t, "say", "--home", home, filepath.Base(findRun(home)), text); s.exitCode() != 0 {
					t.Fatalf("apodex say: %s", s.output())
				}
			}
			return stop(w)
		})
		if ok {
			return task, home, dir, w
		}
		if attempt == 5 {
			t.Fatalf("in 5 attempts the run ended before the kill point:\n%s", c.output())
		}
		t.Logf("attempt %d: the run ended before the kill point; again", attempt)
	}
}

func resumeJSON(t *testing.T, home, dir string) (int, run.Summary, string) {
	t.Helper()
	c := startChild(t, "resume", "--home", home, "--json", "--quiet", filepath.Base(dir))
	code := c.exitCode()
	var s run.Summary
	json.Unmarshal(c.out.Bytes(), &s)
	return code, s, c.output()
}

// TestTaskDeletedAfterStart: the run keeps its own task. A run whose task
// copy is deleted while it works completes and verifies; one killed after
// the deletion resumes, completes and verifies, from its directory alone.
func TestTaskDeletedAfterStart(t *testing.T) {
	needApodex(t)
	t.Run("live", func(t *testing.T) {
		task, home := copyExample(t), t.TempDir()
		c := startChild(t, exampleRun(home, task)...)
		deleted := false
		c.runUntil(t, aimedSlice, func() bool {
			if !deleted && findRun(home) != "" {
				if w := newWatch(findRun(home)); w.read() == nil && w.lines() >= 3 {
					os.RemoveAll(task)
					deleted = true
				}
			}
			return false
		})
		if code := c.exitCode(); code != 0 || !deleted {
			t.Fatalf("run exited %d (task deleted mid-run: %v):\n%s", code, deleted, c.output())
		}
		if v := startChild(t, "verify", "--home", home, filepath.Base(findRun(home))); v.exitCode() != 0 {
			t.Fatalf("apodex verify after the task was deleted: exit %d\n%s", v.exitCode(), v.output())
		}
	})
	t.Run("killed", func(t *testing.T) {
		task, home := copyExample(t), t.TempDir()
		c := startChild(t, exampleRun(home, task)...)
		dir, _ := killWhen(t, c, home, func(w *watch) bool { return w.lines() >= 8 })
		if err := os.RemoveAll(task); err != nil {
			t.Fatal(err)
		}
		code, s, out := resumeJSON(t, home, dir)
		if code != 0 || s.Status != run.StatusCompleted {
			t.Fatalf("resume after the task was deleted: exit %d status %q\n%s", code, s.Status, out)
		}
		if v := startChild(t, "verify", "--home", home, filepath.Base(dir)); v.exitCode() != 0 {
			t.Fatalf("apodex verify: exit %d\n%s", v.exitCode(), v.output())
		}
	})
}

// TestRevisionSurvivesKill: a message that adds a deliverable revises the
// contract; a kill right after the revised contract event (before the
// message's own event) and a resume keep the revision, once: the final
// gate asks for the new deliverable and the record holds one revision.
func TestRevisionSurvivesKill(t *testing.T) {
	needApodex(t)
	task, home, dir, w := killAfterSaying(t, "Please also deliver /outputs/extra.md with a one-line summary.", func(w *watch) bool {
		var ce record.Contract
		e := lastEvent(w)
		return e.Type == record.TypeContract && e.Decode(&ce) == nil && ce.Version == 2
	})
	t.Logf("killed after %d events (%s)", w.lines(), w.lastTypes(2))
	os.RemoveAll(task)
	_, s, out := resumeJSON(t, home, dir)
	if !strings.Contains(strings.Join(s.Failures, "\n"), "/outputs/extra.md") {
		t.Fatalf("the resumed run's gate does not ask for /outputs/extra.md: failures %v\n%s", s.Failures, out)
	}
	rec, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var revisions []record.Contract
	for _, e := range rec.Events {
		var ce record.Contract
		if e.Type == record.TypeContract && e.Decode(&ce) == nil && ce.Version > 0 {
			revisions = append(revisions, ce)
		}
	}
	if len(revisions) != 1 || revisions[0].Message == "" || !strings.Contains(revisions[0].Text, "/outputs/extra.md") {
		t.Fatalf("revisions %+v; want exactly one, by the message", revisions)
	}
}

// TestMessageControlSurvivesKill: "pause" sent as a message is applied as a
// control; after a kill right after it was recorded, the resumed run is
// still paused (no model call) until it is resumed.
func TestMessageControlSurvivesKill(t *testing.T) {
	needApodex(t)
	_, home, dir, _ := killAfterSaying(t, "pause", func(w *watch) bool {
		var m record.Message
		e := lastEvent(w)
		return e.Type == record.TypeMessage && e.Decode(&m) == nil && m.Control == "pause"
	})
	r := startChild(t, "resume", "--home", home, "--json", "--quiet", filepath.Base(dir))
	var resumedAt int64
	deadline := time.Now().Add(30 * time.Second)
	for resumedAt == 0 && time.Now().Before(deadline) && !r.exited() {
		rec, _ := record.Read(dir)
		for _, e := range rec.Events {
			if e.Type == record.TypeResumed {
				resumedAt = e.Seq
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resumedAt == 0 {
		t.Fatalf("the resume did not start:\n%s", r.output())
	}
	time.Sleep(700 * time.Millisecond) // a paused run makes no model call meanwhile
	rec, _ := record.Read(dir)
	for _, e := range rec.Events[resumedAt:] {
		if e.Type == record.TypeModelRequest || e.Type == record.TypeRunFinished {
			t.Fatalf("the resumed run went on (%s at seq %d): the pause sent in a message was lost", e.Type, e.Seq)
		}
	}
	if p := startChild(t, "resume", "--home", home, filepath.Base(dir)); p.exitCode() != 0 {
		t.Fatalf("apodex resume of the paused live run: %s", p.output())
	}
	if code := r.exitCode(); code != 0 {
		t.Fatalf("the resumed run exited %d after its resume:\n%s", code, r.output())
	}
}
