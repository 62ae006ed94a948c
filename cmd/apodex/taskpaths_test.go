package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
)

// A task file's host paths stay in its directory (F13): `inputs: /etc`, a
// path up and out, or a link in the task directory to /etc are refused
// before the run starts, exit 2, naming the key, the path and the flag;
// with --allow-outside-task a path outside is accepted and copied in.
func TestTaskPathsOutsideTheTaskDirectory(t *testing.T) {
	base := t.TempDir()
	dir, out := filepath.Join(base, "task"), filepath.Join(base, "elsewhere")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "host.txt"), []byte("from outside\n"), 0o644)
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	task := func(t *testing.T, inputs string) string {
		t.Helper()
		p := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(inputs)+".yaml")
		if err := os.WriteFile(p, []byte("objective: look at /inputs\ninputs: "+inputs+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ name, inputs string }{
		{"inputs: /etc", "/etc"},
		{"inputs: ../elsewhere", "../elsewhere"},
		{"a link in the task directory to /etc", "./etc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("done"))))
			code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--sandbox", "none", "--task", task(t, c.inputs))...)
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s%s", code, stdout, stderr)
			}
			for _, want := range []string{"inputs: " + c.inputs, "--allow-outside-task", dir} {
				if !strings.Contains(stderr, want) {
					t.Errorf("the refusal does not name %q:\n%s", want, stderr)
				}
			}
			if len(srv.Requests()) > 0 {
				t.Error("the model was called: the run started")
			}
			if runs, _ := filepath.Glob(filepath.Join(home, "runs", "*")); len(runs) > 0 {
				t.Errorf("a run directory was made: %v", runs)
			}
		})
	}
	t.Run("accepted with --allow-outside-task", func(t *testing.T) {
		home := t.TempDir()
		srv := llmtest.NewOpenAI(t, llmtest.Script(calls(finish("done"))))
		code, stdout, stderr := cli(t, append(openaiArgs(home, srv), "--sandbox", "none", "--quiet", "--json", "--allow-outside-task", "--task", task(t, "../elsewhere"))...)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		if got := fileContent(t, filepath.Join(decodeSummary(t, stdout).RunDir, "inputs", "host.txt")); got != "from outside\n" {
			t.Errorf("inputs/host.txt holds %q", got)
		}
	})
	t.Run("the flag needs --task", func(t *testing.T) {
		code, _, stderr := cli(t, "run", "--home", t.TempDir(), "--allow-outside-task", "objective")
		if code != 2 || !strings.Contains(stderr, "--allow-outside-task needs --task") {
			t.Errorf("exit %d: %s", code, stderr)
		}
	})
}
