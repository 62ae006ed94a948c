package crashtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// TestE2SymlinkResume is E2 of issue 11, end to end: the lead's bash makes
// /workspace/d a symbolic link to a host directory after a subagent wrote
// /workspace/d/x in its worktree; the run is killed (SIGKILL) while the
// subagent is in a slow command, and resumed. Rebuilding the subagent's
// worktree must refuse the recorded delta, naming its seq, and write
// nothing outside the run. The tampered variant removes the link and
// edits the recorded delta's path to climb out with ".." instead.
func TestE2SymlinkResume(t *testing.T) {
	t.Run("link", func(t *testing.T) { e2(t, false) })
	t.Run("tampered record", func(t *testing.T) { e2(t, true) })
}

func e2(t *testing.T, tamper bool) {
	needApodex(t)
	base := t.TempDir()
	host := filepath.Join(base, "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	script := map[string]any{"agents": map[string]any{
		"lead": map[string]any{"turns": []any{
			turn(call("board_add", map[string]any{"title": "x", "objective": "write /workspace/d/x"})),
			turn(call("dispatch", map[string]any{"item": "T1", "role": "writer", "instructions": "write /workspace/d/x", "tools": []string{"write_file", "bash"}})),
			turn(call("bash", map[string]any{"command": "while ! test -e /workspace/.a1-wrote; do sleep 0.05; done; ln -s " + host + " /workspace/d && echo linked"})),
			turn(call("wait", map[string]any{"assignments": []string{"A1"}})),
			turn(call("wait", map[string]any{"assignments": []string{"A1"}})),
			turn(call("finish", map[string]any{"summary": "done"})),
		}},
		"A1": map[string]any{"turns": []any{
			turn(call("write_file", map[string]any{"path": "/workspace/d/x", "content": "pwned\n"})),
			turn(call("bash", map[string]any{"command": "sleep 60"})),
			turn(call("report", map[string]any{"summary": "wrote d/x"})),
		}},
	}}
	// The lead links only once A1's write is recorded (the test marks it in
	// the shared workspace), so A1 wrote d/x into a directory of its own.
	b, _ := json.Marshal(script)
	dir := filepath.Join(base, "task")
	mustWrite(t, filepath.Join(dir, "script.json"), string(b))
	mustWrite(t, filepath.Join(dir, "task.yaml"), "objective: write d/x\n")
	home := filepath.Join(base, "home")
	args := []string{"--home", home, "--provider", "scripted", "--script", filepath.Join(dir, "script.json"), "--quiet"}
	c := startChild(t, append([]string{"run", "--task", filepath.Join(dir, "task.yaml"), "--mode", "team"}, args...)...)

	var w *watch
	deltaSeq := int64(0)
	linked := false
	deadline := time.Now().Add(60 * time.Second)
	for !linked || deltaSeq == 0 {
		if time.Now().After(deadline) || c.exited() {
			t.Fatalf("the run never reached the kill point (delta seq %d, linked %v): %s", deltaSeq, linked, c.output())
		}
		time.Sleep(20 * time.Millisecond)
		if w == nil {
			if rd := findRun(home); rd != "" {
				w = newWatch(rd)
			}
			continue
		}
		if w.read() != nil {
			continue
		}
		for i, line := range strings.SplitAfter(string(w.data), "\n") {
			if strings.Contains(line, `"type":"file_delta"`) && strings.Contains(line, `"/workspace/d/x"`) && deltaSeq == 0 {
				deltaSeq = w.events[i].Seq
				mustWrite(t, filepath.Join(filepath.Dir(w.path), "workspace", ".a1-wrote"), "")
			}
			if strings.Contains(line, `"type":"tool_result"`) && strings.Contains(line, "linked") {
				linked = true
			}
		}
	}
	c.kill()
	runDir := filepath.Dir(w.path)
	if fi, err := os.Lstat(filepath.Join(runDir, "workspace", "d")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the lead's link is not in the shared workspace: %v", err)
	}

	if tamper {
		must(t, os.Remove(filepath.Join(runDir, "workspace", "d")))
		// From a resumed worktree (runs/<id>/worktrees/<name>/merged) to host.
		up, err := filepath.Rel(filepath.Join(runDir, "worktrees", "name", "merged"), host)
		must(t, err)
		path := filepath.Join(runDir, record.EventsFile)
		data, err := os.ReadFile(path)
		must(t, err)
		edited := strings.Replace(string(data), `"path":"/workspace/d/x"`, `"path":"/workspace/`+up+`/x"`, 1)
		if edited == string(data) {
			t.Fatal("the delta was not found to tamper with")
		}
		must(t, os.WriteFile(path, []byte(edited), 0o644))
		// The edit breaks the record's hash chain at the delta (or, were it
		// the last line kept, its head): resume refuses it, naming the seq.
		r := startChild(t, append([]string{"resume", filepath.Base(runDir)}, args...)...)
		select {
		case <-r.done:
		case <-time.After(90 * time.Second):
			t.Fatal("resume did not end")
		}
		if out := r.output(); !strings.Contains(out, "the record was changed after it was written") || !strings.Contains(out, "seq "+strconv.FormatInt(deltaSeq, 10)) {
			t.Fatalf("resume of a record whose delta at seq %d was edited: %s", deltaSeq, out)
		}
		if after, _ := os.ReadFile(path); string(after) != edited {
			t.Fatal("the refused resume wrote to the record")
		}
		// Behind the chain (which has no key: anyone can recompute it) the
		// delta's path is still checked.
		must(t, record.Reseal(runDir))
	}
	r := startChild(t, append([]string{"resume", filepath.Base(runDir)}, args...)...)
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		t.Fatal("resume did not end")
	}
	if entries, _ := os.ReadDir(host); len(entries) != 0 {
		t.Fatalf("resume wrote outside the run: %v (resume said: %s)", entries, r.output())
	}
	data, err := os.ReadFile(filepath.Join(runDir, record.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	refusal := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"type":"assignment"`) && strings.Contains(line, "was not replayed") {
			refusal = line
		}
	}
	if refusal == "" || !strings.Contains(refusal, "seq "+strconv.FormatInt(deltaSeq, 10)) {
		t.Fatalf("no assignment failure naming seq %d:\n%s\nresume said: %s", deltaSeq, refusal, r.output())
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), runDir) {
		t.Fatal("the refused worktree is still mounted")
	}
}

func turn(calls ...map[string]any) map[string]any { return map[string]any{"calls": calls} }

func call(name string, args map[string]any) map[string]any {
	return map[string]any{"name": name, "args": args}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
