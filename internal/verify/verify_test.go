package verify

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/sandbox"
)

// state is a finished run on disk: a task directory with its tests, and the
// run's inputs, workspace and outputs.
type state struct {
	env  Env
	task string
}

func newState(t *testing.T) state {
	t.Helper()
	runner, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write(t, root, map[string]string{
		"task/data/data.csv": "name,value\na,1\nb,2\n",
		// The real test: the delivered sum must be 3.
		"task/tests/check.sh": "test \"$(cat /outputs/sum.txt)\" = 3 || { echo \"sum is $(cat /outputs/sum.txt), want 3\" >&2; exit 1; }\n",
		"workspace/notes.md":  "scratch work\n",
		"outputs/sum.txt":     "3\n",
	})
	return state{
		env: Env{
			Runner:    runner,
			Inputs:    filepath.Join(root, "task/data"),
			Workspace: filepath.Join(root, "workspace"),
			Outputs:   filepath.Join(root, "outputs"),
			Timeout:   time.Minute,
		},
		task: filepath.Join(root, "task"),
	}
}

// clauses parses a task file's verify list in the state's task directory.
func (s state) clauses(t *testing.T, verify string) []contract.Clause {
	t.Helper()
	task := "inputs: ./data\ndeliverables:\n  - path: /outputs/sum.txt\n" + verify
	c, err := contract.Parse([]byte(task), s.task)
	if err != nil {
		t.Fatal(err)
	}
	return c.Verify
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

const testsClause = "verify:\n  - kind: tests\n    command: sh /tests/check.sh\n    files: ./tests\n"

func TestTests(t *testing.T) {
	s := newState(t)
	cl := s.clauses(t, testsClause)[0]
	r := Run(context.Background(), s.env, cl)
	if !r.Passed || r.ExitCode != 0 || r.Kind != contract.KindTests || r.Command != "sh /tests/check.sh" {
		t.Fatalf("good state failed: %+v", r)
	}

	write(t, s.env.Outputs, map[string]string{"sum.txt": "4\n"})
	r = Run(context.Background(), s.env, cl)
	if r.Passed || r.ExitCode != 1 || !strings.Contains(r.Detail, "sum is 4, want 3") || !strings.Contains(r.Stderr, "want 3") {
		t.Errorf("bad state passed or said too little: %+v", r)
	}
}

// TestPlantedFilesChangeNothing: a reward file and a permissive check.sh in
// the workspace (or outputs) do not turn a failing verdict into a pass.
func TestPlantedFilesChangeNothing(t *testing.T) {
	s := newState(t)
	write(t, s.env.Outputs, map[string]string{"sum.txt": "4\n", "check.sh": "exit 0\n", "reward": "1\n"})
	write(t, s.env.Workspace, map[string]string{"check.sh": "exit 0\n", "reward": "1\n", "tests/check.sh": "exit 0\n", ".profile": "exit 0\n"})
	cl := s.clauses(t, testsClause)[0]
	if r := Run(context.Background(), s.env, cl); r.Passed {
		t.Errorf("planted files turned a failing state into a pass: %+v", r)
	}

	// And a planted failing test does not fail a good state.
	write(t, s.env.Outputs, map[string]string{"sum.txt": "3\n"})
	write(t, s.env.Workspace, map[string]string{"check.sh": "exit 1\n", "tests/check.sh": "exit 1\n", "reward": "0\n"})
	if r := Run(context.Background(), s.env, cl); !r.Passed {
		t.Errorf("planted files turned a passing state into a failure: %+v", r)
	}
}

// TestReadOnly: a clause can read every plane and write none of them; its
// working directory is /tests, /tmp is fresh, and its environment is the
// clean one (no PYTHONPATH, no variable of the caller).
func TestReadOnly(t *testing.T) {
	s := newState(t)
	cmd := `set -e
cat /inputs/data.csv /workspace/notes.md /outputs/sum.txt /tests/check.sh >/dev/null
test "$(pwd)" = /tests
test -z "$(ls -A /tmp)"
test -z "${PYTHONPATH+set}" && test -z "${APODEX_CANARY+set}"
test "$PYTHONNOUSERSITE" = 1
for d in /inputs /workspace /outputs /tests; do
  if touch $d/planted 2>/dev/null; then echo "$d is writable"; exit 1; fi
done
echo ok`
	clauses := s.clauses(t, "verify:\n  - kind: tests\n    command: |\n"+indent(cmd, "      ")+"\n    files: ./tests\n")
	t.Setenv("PYTHONPATH", "/workspace")
	t.Setenv("APODEX_CANARY", "1")
	r := Run(context.Background(), s.env, clauses[0])
	if !r.Passed || strings.TrimSpace(r.Stdout) != "ok" {
		t.Errorf("%+v", r)
	}
	for _, d := range []string{s.env.Inputs, s.env.Workspace, s.env.Outputs, filepath.Join(s.task, "tests")} {
		if _, err := os.Stat(filepath.Join(d, "planted")); err == nil {
			t.Errorf("the clause wrote into %s", d)
		}
	}
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}

func TestRecompute(t *testing.T) {
	s := newState(t)
	const awk = `awk -F, 'NR>1{s+=$2} END{print s}' /inputs/data.csv`
	cases := []struct {
		name, sum, extra string
		pass             bool
		detail           string
	}{
		{"equal", "3\n", "", true, `equals the recomputed value "3"`},
		{"equal after trimming", "  3  \n\n", "", true, "equals"},
		{"unequal", "4\n", "", false, `holds "4" but the recompute printed "3"`},
		{"text is not a number", "3.0\n", "", false, `holds "3.0" but`},
		{"within tolerance", "3.0000000001\n", "    tolerance: 1e-9\n", true, "within 1e-09"},
		{"outside tolerance", "3.1\n", "    tolerance: 1e-9\n", false, "difference"},
		{"not a number", "three\n", "    tolerance: 1e-9\n", false, `"three", which is not a number`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			write(t, s.env.Outputs, map[string]string{"sum.txt": tc.sum})
			cl := s.clauses(t, "verify:\n  - kind: recompute\n    command: "+awk+"\n    compare: /outputs/sum.txt\n"+tc.extra)[0]
			r := Run(context.Background(), s.env, cl)
			if r.Passed != tc.pass || !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("passed %v (want %v), detail %q (want %q)", r.Passed, tc.pass, r.Detail, tc.detail)
			}
		})
	}
}

func TestRecomputeRefusesSymlinkAndFailingCommand(t *testing.T) {
	s := newState(t)
	cl := s.clauses(t, "verify:\n  - kind: recompute\n    command: cat /inputs/data.csv\n    compare: /outputs/sum.txt\n")[0]
	if err := os.Remove(filepath.Join(s.env.Outputs, "sum.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(s.env.Inputs, "data.csv"), filepath.Join(s.env.Outputs, "sum.txt")); err != nil {
		t.Fatal(err)
	}
	if r := Run(context.Background(), s.env, cl); r.Passed || !strings.Contains(r.Detail, "not a regular file") {
		t.Errorf("a symlink to the expected content passed: %+v", r)
	}

	cl = s.clauses(t, "verify:\n  - kind: recompute\n    command: echo 3; exit 2\n    compare: /outputs/sum.txt\n")[0]
	write(t, s.env.Outputs, map[string]string{"plain.txt": ""})
	if r := Run(context.Background(), s.env, cl); r.Passed || r.ExitCode != 2 || !strings.Contains(r.Detail, "failed (exit 2)") {
		t.Errorf("a failing recompute command passed: %+v", r)
	}
}

func TestCommandNotFound(t *testing.T) {
	s := newState(t)
	for _, verify := range []string{
		"verify:\n  - kind: tests\n    command: no-such-verifier --check\n",
		"verify:\n  - kind: recompute\n    command: no-such-tool\n    compare: /outputs/sum.txt\n",
	} {
		r := Run(context.Background(), s.env, s.clauses(t, verify)[0])
		if r.Passed || r.ExitCode != 127 || !strings.Contains(r.Detail, "was not found") {
			t.Errorf("%q: %+v", verify, r)
		}
	}
	// sh reports a missing script with exit 2, not 127; the detail names it.
	r := Run(context.Background(), s.env, s.clauses(t, "verify:\n  - kind: tests\n    command: sh /tests/missing.sh\n    files: ./tests\n")[0])
	if r.Passed || !strings.Contains(r.Detail, "cannot open /tests/missing.sh") {
		t.Errorf("missing script: %+v", r)
	}
}

func TestTimeoutAndRunAll(t *testing.T) {
	s := newState(t)
	clauses := s.clauses(t, testsClause+"  - kind: tests\n    name: slow\n    command: sleep 30\n    timeout: 200ms\n")
	rs := RunAll(context.Background(), s.env, clauses)
	if len(rs) != 2 || !rs[0].Passed || rs[1].Passed || !strings.Contains(rs[1].Detail, "timed out after 200ms") {
		t.Fatalf("%+v", rs)
	}
	if rs[1].Label() != `verify[1] "slow" (tests)` {
		t.Errorf("label %q", rs[1].Label())
	}
}

func TestUnrunnable(t *testing.T) {
	cl := contract.Clause{Kind: contract.KindTests, Command: "true"}
	if r := Run(context.Background(), Env{}, cl); r.Passed || !strings.Contains(r.Detail, "no sandbox") {
		t.Errorf("no runner: %+v", r)
	}
	if r := Run(context.Background(), Env{Runner: sandbox.None{}}, contract.Clause{Kind: "rubric", Command: "true"}); r.Passed || !strings.Contains(r.Detail, "not supported") {
		t.Errorf("unknown kind: %+v", r)
	}
}

func TestMissingDirectory(t *testing.T) {
	s := newState(t)
	cl := s.clauses(t, testsClause)[0]
	if err := os.RemoveAll(cl.Files); err != nil {
		t.Fatal(err)
	}
	if r := Run(context.Background(), s.env, cl); r.Passed || !strings.Contains(r.Detail, "/tests cannot be mounted") {
		t.Errorf("%+v", r)
	}
}

func TestIsClose(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		a, b, tol float64
		want      bool
	}{
		{3, 3, 0, true},
		{3, 3.0000000001, 1e-9, true},
		{3, 3.01, 1e-9, false},
		{0, 1e-10, 1e-9, true},         // absolute near zero
		{1e12, 1e12 + 100, 1e-9, true}, // relative for large values
		{1e12, 1e12 + 10000, 1e-9, false},
		{inf, inf, 1e-9, true},
		{inf, 1e308, 1, false},
	} {
		if got := isClose(tc.a, tc.b, tc.tol); got != tc.want {
			t.Errorf("isClose(%g, %g, %g) = %v", tc.a, tc.b, tc.tol, got)
		}
	}
}
