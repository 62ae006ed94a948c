package team_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/team"
)

// TestSharedIsolation: in the shared workspace a subagent writes only under
// /workspace/<its id>/, with file tools and in bash alike; it reads the
// others' directories.
func TestSharedIsolation(t *testing.T) {
	h := newHarness(t)
	h.needSandbox()
	var saw flags
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch {
		case turn == 0:
			return calls(add("First", "Write /workspace/A1/own.txt"), add("Second", "Read A1's file, write your own"),
				dispatch("T1", "first writer", "write_file", "read_file")), nil
		case !seen(req, "Assignment A1 ("):
			return calls(wait("A1")), nil
		case called(req, "dispatch") == 1:
			return calls(dispatch("T2", "second writer", "write_file", "read_file", "bash")), nil
		case !seen(req, "Assignment A2 ("):
			return calls(wait("A2")), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1"), resolve("T2", "report:A2")), nil
		}
		return calls(finish("both wrote in their own directories")), nil
	}
	a1 := steps(calls(writeFile("/workspace/A1/own.txt", "from A1\n")), calls(report("wrote own.txt", "/workspace/A1/own.txt")))
	a2 := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			saw.set("A2 task", req.Messages[1].Content)
			return calls(
				readFile("/workspace/A1/own.txt"),
				writeFile("/workspace/A2/mine.txt", "from A2\n"),
				writeFile("/workspace/escape.txt", "outside"),
				writeFile("/workspace/A1/own.txt", "overwritten by A2"),
				bash("echo outside > /workspace/shell-escape.txt"),
				bash("echo other > /workspace/A1/shell.txt"),
				bash("echo inside > /workspace/A2/shell.txt && cat /workspace/A1/own.txt")), nil
		}
		return calls(report("read A1, wrote mine", "/workspace/A2/mine.txt")), nil
	}
	model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": a1, "A2": a2}))
	out := h.run(model, func(c *team.Config) { c.Isolation = team.Shared })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	if task := saw.get("A2 task"); !strings.Contains(task, "write only under /workspace/A2/") {
		t.Errorf("A2's first message does not state its directory:\n%s", task)
	}
	if r := h.nth("A2", "read_file", 0); r.IsError || !strings.Contains(r.Output, "from A1") {
		t.Errorf("A2 could not read A1's file: %q", r.Output)
	}
	wantOK(t, "A2 writing its own directory", h.nth("A2", "write_file", 0))
	wantRefused(t, "A2 writing the workspace root", h.nth("A2", "write_file", 1), "only under /workspace/A2/")
	wantRefused(t, "A2 writing A1's directory", h.nth("A2", "write_file", 2), "only under /workspace/A2/")
	for i, want := range []bool{false, false, true} {
		r := h.nth("A2", "bash", i)
		if ok := strings.Contains(r.Output, "exit code: 0"); ok != want {
			t.Errorf("A2's bash %d: success %v, want %v: %q", i, ok, want, r.Output)
		}
	}
	if r := h.nth("A2", "bash", 2); !strings.Contains(r.Output, "from A1") {
		t.Errorf("A2's bash could not read A1's file: %q", r.Output)
	}
	for _, p := range []string{"/workspace/escape.txt", "/workspace/shell-escape.txt", "/workspace/A1/shell.txt"} {
		if _, err := os.Stat(h.host(p)); err == nil {
			t.Errorf("%s was written outside A2's directory", p)
		}
	}
	for p, want := range map[string]string{"/workspace/A1/own.txt": "from A1\n", "/workspace/A2/mine.txt": "from A2\n", "/workspace/A2/shell.txt": "inside\n"} {
		if got := readHost(t, h.host(p)); got != want {
			t.Errorf("%s = %q; want %q", p, got, want)
		}
	}
}

// TestPerAgentConflict: two subagents change the same file in their
// worktrees; the first merge applies, the second is a conflict reported to
// the lead, and the shared file keeps the first version.
func TestPerAgentConflict(t *testing.T) {
	h := newHarness(t)
	h.seed("/workspace/shared.txt", "base\n")
	a2Started := make(chan struct{})
	var saw flags
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch {
		case turn == 0:
			return calls(add("One", "Edit shared.txt"), add("Two", "Edit shared.txt too"),
				dispatch("T1", "first editor", "write_file"), dispatch("T2", "second editor", "write_file")), nil
		case !seen(req, "Assignment A1 (") || !seen(req, "Assignment A2 ("):
			return calls(wait()), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1"), resolve("T2", "report:A2")), nil
		}
		return calls(finish("one version kept")), nil
	}
	a1 := func(turn int, req *llm.Request) (*llm.Response, error) {
		if turn == 0 {
			return calls(writeFile("/workspace/shared.txt", "from A1\n")), nil
		}
		// Report (and merge) only once A2's worktree exists, so that both
		// started from the same shared version.
		select {
		case <-a2Started:
		case <-time.After(10 * time.Second):
			saw.set("A2", "A2 never started")
		}
		return calls(report("edited shared.txt")), nil
	}
	a2 := func(turn int, req *llm.Request) (*llm.Response, error) {
		if turn == 0 {
			close(a2Started)
			return calls(writeFile("/workspace/shared.txt", "from A2\n")), nil
		}
		// Report (and merge) only after A1's version reached the shared file.
		if !eventually(10*time.Second, func() bool {
			b, _ := os.ReadFile(h.host("/workspace/shared.txt"))
			return string(b) == "from A1\n"
		}) {
			saw.set("A1", "A1's version never reached the shared workspace")
		}
		return calls(report("edited shared.txt")), nil
	}
	model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": a1, "A2": a2}))
	out := h.run(model, func(c *team.Config) { c.Isolation = team.PerAgent })
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	for _, k := range []string{"A1", "A2"} {
		if v := saw.get(k); v != "" {
			t.Fatal(v)
		}
	}
	if got := readHost(t, h.host("/workspace/shared.txt")); got != "from A1\n" {
		t.Errorf("shared.txt = %q; want the first merged version", got)
	}
	notices := h.leadNotices()
	if !strings.Contains(notices, "CONFLICT shared.txt") {
		t.Errorf("the lead was not told of the conflict:\n%s", notices)
	}
	a2Notice := notices[strings.Index(notices, "Assignment A2 ("):]
	if !strings.Contains(a2Notice, "CONFLICT shared.txt") {
		t.Errorf("the conflict is not in A2's notice:\n%s", a2Notice)
	}
	merges := decode[struct {
		Assignment string `json:"assignment"`
		Applied    []struct {
			Path string `json:"path"`
		} `json:"applied"`
		Conflicts []struct {
			Path string `json:"path"`
		} `json:"conflicts"`
	}](t, h.events, record.TypeMerge)
	if len(merges) != 2 || merges[0].Assignment != "A1" || len(merges[0].Applied) != 1 || len(merges[0].Conflicts) != 0 ||
		merges[1].Assignment != "A2" || len(merges[1].Applied) != 0 || len(merges[1].Conflicts) != 1 || merges[1].Conflicts[0].Path != "shared.txt" {
		t.Errorf("merge events = %+v; want A1 applied shared.txt, then A2 in conflict on it", merges)
	}
	kept := filepath.Join(h.dir, "worktrees", "A2", "conflicts", "shared.txt")
	if got := readHost(t, kept); got != "from A2\n" {
		t.Errorf("A2's version set aside in %s = %q", kept, got)
	}
}

// TestMergedDirectoryWritableByBash: A2's worktree is mounted (it ran a
// command) when A1's merge brings a new directory into /workspace; A2's
// bash can then create files in that directory, as write_file can.
func TestMergedDirectoryWritableByBash(t *testing.T) {
	h := newHarness(t)
	h.needSandbox()
	merged := make(chan struct{})
	var once sync.Once
	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch {
		case turn == 0:
			return calls(add("First", "Make /workspace/newdir"), add("Second", "Write into newdir"),
				dispatch("T1", "maker", "bash"), dispatch("T2", "writer", "bash", "write_file")), nil
		case !seen(req, "Assignment A1 ("):
			return calls(wait("A1")), nil
		case !seen(req, "Assignment A2 ("):
			once.Do(func() { close(merged) }) // A1 has reported and merged
			return calls(wait("A2")), nil
		case called(req, "board_resolve") == 0:
			return calls(resolve("T1", "report:A1"), resolve("T2", "report:A2")), nil
		}
		return calls(finish("done")), nil
	}
	a1 := steps(calls(bash("mkdir -p /workspace/newdir/deep && echo from A1 > /workspace/newdir/deep/a.txt")),
		calls(report("made newdir", "/workspace/newdir/deep/a.txt")))
	a2 := func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0: // the worktree is mounted and the command ran before the merge
			return calls(bash("echo early > /workspace/early.txt")), nil
		case 1:
			select {
			case <-merged:
			case <-time.After(10 * time.Second):
				return nil, fmt.Errorf("test: A1's merge never came")
			}
			return calls(bash("cat /workspace/newdir/deep/a.txt && echo from A2 > /workspace/newdir/deep/b.txt && mkdir /workspace/newdir/sub && echo x > /workspace/newdir/sub/c.txt"),
				writeFile("/workspace/newdir/deep/w.txt", "by write_file\n")), nil
		}
		return calls(report("wrote into newdir", "/workspace/newdir/deep/b.txt")), nil
	}
	model := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "A1": a1, "A2": a2}))
	out := h.run(model, nil)
	if out.Termination != agent.Completed {
		t.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	r := h.nth("A2", "bash", 1)
	if !strings.Contains(r.Output, "exit code: 0") || !strings.Contains(r.Output, "from A1") {
		t.Errorf("A2's bash in the merged directory: %q", r.Output)
	}
	wantOK(t, "A2's write_file in the merged directory", h.nth("A2", "write_file", 0))
	for _, p := range []string{"/workspace/newdir/deep/b.txt", "/workspace/newdir/sub/c.txt", "/workspace/newdir/deep/w.txt"} {
		if _, err := os.Stat(h.host(p)); err != nil {
			t.Errorf("%s was not merged: %v", p, err)
		}
	}
}
