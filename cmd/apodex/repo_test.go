package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/runtest"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestRepoRunDiffApply: a run on a git checkout works on a copy (the
// checkout is not written, .git and ignored files are not in the view),
// diff prints exactly the agent's changes, apply refuses after a
// conflicting edit and then changes exactly those files.
func TestRepoRunDiffApply(t *testing.T) {
	runtest.NeedSandbox(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	checkout := t.TempDir()
	git(t, checkout, "init", "-q")
	writeFile(t, filepath.Join(checkout, "a.txt"), "one\ntwo\nthree\n")
	writeFile(t, filepath.Join(checkout, "sub", "b.txt"), "bee\n")
	writeFile(t, filepath.Join(checkout, "bin.dat"), "\x00\x01old")
	writeFile(t, filepath.Join(checkout, ".gitignore"), "build/\n")
	writeFile(t, filepath.Join(checkout, "AGENTS.md"), "REPO-LINE: keep lines short\n")
	writeFile(t, filepath.Join(checkout, "build", "out.o"), "ignored\n")
	git(t, checkout, "add", "-A")
	git(t, checkout, "commit", "-qm", "base")

	var mu sync.Mutex
	var system string
	srv := llmtest.NewOpenAI(t, func(n int, req llmtest.Request) llmtest.Turn {
		mu.Lock()
		if n == 0 {
			system = req.Messages[0].Content
		}
		mu.Unlock()
		switch n {
		case 0:
			return calls(
				call("write_file", map[string]any{"path": "/workspace/a.txt", "content": "one\nTWO\nthree\n"}),
				call("write_file", map[string]any{"path": "/workspace/new.txt", "content": "fresh\n"}),
			)
		case 1:
			return calls(bash("ls -A /workspace > /outputs/scratch/ls.txt; rm /workspace/sub/b.txt && printf '\\000\\002new' > /workspace/bin.dat && mkdir -p /workspace/build && echo x > /workspace/build/new.o"))
		}
		return calls(finish("edited"))
	})
	home := t.TempDir()
	s := peRun(t, 0, append(openaiArgs(home, srv), "--repo", checkout, "edit the tree")...)
	if !strings.Contains(system, "REPO-LINE: keep lines short") {
		t.Errorf("the tree's AGENTS.md did not reach the system prompt:\n%s", system)
	}
	if st := git(t, checkout, "status", "--porcelain"); st != "" {
		t.Fatalf("the checkout was written during the run:\n%s", st)
	}
	for _, p := range []string{".git", "build/out.o"} {
		if _, err := os.Stat(filepath.Join(s.RunDir, "workspace", p)); err == nil {
			t.Errorf("%s is in the view", p)
		}
	}
	id := filepath.Base(s.RunDir)
	// The replay starts from the run's baseline, not from the tree.
	writeFile(t, filepath.Join(checkout, "AGENTS.md"), "changed after the run\n")
	if code, out, errOut := cli(t, "replay", "--home", home, id); code != 0 || !strings.Contains(out, "identical") {
		t.Fatalf("replay of a run on a tree: exit %d\n%s\n%s", code, out, errOut)
	}
	git(t, checkout, "checkout", "--", "AGENTS.md")

	code, diff, errOut := cli(t, "diff", "--home", home, id)
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"diff --git a/a.txt b/a.txt\n", "-two\n+TWO\n",
		"diff --git a/new.txt b/new.txt\nnew file mode 100644\n", "+fresh\n",
		"diff --git a/sub/b.txt b/sub/b.txt\ndeleted file mode 100644\n",
		"Binary files a/bin.dat and b/bin.dat differ\n",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "build/") || strings.Contains(diff, "AGENTS.md") {
		t.Errorf("the diff names files the agent did not change (or ignored ones):\n%s", diff)
	}

	// A conflicting edit in the checkout: apply refuses, naming it, and writes nothing.
	writeFile(t, filepath.Join(checkout, "a.txt"), "one\ntwo\nthree\nfour\n")
	code, out, errOut := cli(t, "apply", "--home", home, id)
	if code == 0 || !strings.Contains(errOut, "a.txt") || !strings.Contains(errOut, "nothing applied") {
		t.Fatalf("apply after a conflicting edit: exit %d\n%s\n%s", code, out, errOut)
	}
	if st := git(t, checkout, "status", "--porcelain"); st != " M a.txt\n" {
		t.Fatalf("a refused apply wrote the checkout:\n%s", st)
	}
	git(t, checkout, "checkout", "--", "a.txt")
	if code, out, errOut = cli(t, "apply", "--home", home, id); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	got := strings.Split(strings.TrimRight(git(t, checkout, "status", "--porcelain"), "\n"), "\n")
	sort.Strings(got)
	want := []string{" D sub/b.txt", " M a.txt", " M bin.dat", "?? new.txt"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("apply changed %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(checkout, "a.txt")); string(b) != "one\nTWO\nthree\n" {
		t.Fatalf("a.txt is %q", b)
	}
	if code, _, errOut := cli(t, "apply", "--home", home, id); code == 0 {
		t.Log("a second apply is a no-op: every file is already as the run left it")
	} else {
		t.Fatalf("a second apply: exit %d: %s", code, errOut)
	}
}
