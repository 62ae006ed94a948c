package verify

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
)

const testAdd = `import sys, unittest
sys.path.insert(0, "/outputs")
from solution import add

class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_neg(self):
        self.assertEqual(add(-1, 1), 0)

if __name__ == "__main__":
    unittest.main()
`

const (
	goodSolution  = "def add(a, b):\n    return a + b\n"
	wrongSolution = "def add(a, b):\n    return a - b\n"
	exitSolution  = "import os; os._exit(0)\n" // W5: ends the test process with 0
	planted       = "import os; os._exit(0)\n" // sitecustomize.py, unittest.py in /workspace
)

// pyState is a Python task: /tests/test_add.py tests /outputs/solution.py.
func pyState(t *testing.T, solution string) state {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	s := newState(t)
	write(t, s.task, map[string]string{"tests/test_add.py": testAdd})
	write(t, s.env.Outputs, map[string]string{"solution.py": solution})
	return s
}

func pyClause(t *testing.T, s state, command, extra string) Result {
	t.Helper()
	task := "inputs: ./data\ndeliverables:\n  - path: /outputs/sum.txt\nverify:\n  - kind: tests\n    command: " + command + "\n    files: ./tests\n" + extra
	cl := s.clauses(t, strings.TrimPrefix(task, "inputs: ./data\ndeliverables:\n  - path: /outputs/sum.txt\n"))[0]
	return Run(context.Background(), s.env, cl)
}

const mustPassUnittest = "    must_pass: [test_add.TestAdd.test_add, test_neg]\n    report: unittest\n"

// TestMustPassUnittest is W5: a solution that calls os._exit(0) passes a
// clause judged by its exit status, and fails one with must_pass.
func TestMustPassUnittest(t *testing.T) {
	for _, c := range []struct {
		name, solution string
		exitPasses     bool // what a clause judged by exit status says
		want           bool // what must_pass says
		detail         string
	}{
		{"good", goodSolution, true, true, "all 2 tests that must pass were reported passed"},
		{"wrong", wrongSolution, false, false, "did not: test_add.TestAdd.test_add (failed)"},
		{"os._exit(0)", exitSolution, true, false, "the report lists no tests"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := pyState(t, c.solution)
			if r := pyClause(t, s, "python3 test_add.py", ""); r.Passed != c.exitPasses {
				t.Fatalf("exit-status clause: passed=%v: %s", r.Passed, r.Detail)
			}
			r := pyClause(t, s, "python3 -m unittest -v test_add", mustPassUnittest)
			if r.Passed != c.want || !strings.Contains(r.Detail, c.detail) {
				t.Fatalf("must_pass clause: passed=%v, detail %q, want %v and %q\nstderr: %s", r.Passed, r.Detail, c.want, c.detail, r.Stderr)
			}
		})
	}
}

// TestPlantedPythonModules: a sitecustomize.py or unittest.py planted in
// /workspace or /outputs changes no verdict of a clause that keeps them
// off Python's path (the default), and cannot turn a failure into a pass
// of a must_pass clause that puts them on it.
func TestPlantedPythonModules(t *testing.T) {
	plant := func(s state) {
		for _, d := range []string{s.env.Workspace, s.env.Outputs} {
			write(t, d, map[string]string{"sitecustomize.py": planted, "usercustomize.py": planted, "unittest.py": planted, "test_add.py": "pass\n"})
		}
	}
	for _, c := range []struct {
		solution string
		want     bool
	}{{goodSolution, true}, {wrongSolution, false}, {exitSolution, false}} {
		s := pyState(t, c.solution)
		plant(s)
		if r := pyClause(t, s, "python3 -m unittest -v test_add", mustPassUnittest); r.Passed != c.want {
			t.Errorf("%q with planted modules: passed=%v (%s)", c.solution, r.Passed, r.Detail)
		}
		if c.want {
			continue
		}
		for _, cmd := range []string{"PYTHONPATH=/workspace python3 -m unittest -v test_add", "cd /workspace && python3 -m unittest -v test_add", "PYTHONPATH=/outputs python3 /tests/test_add.py -v"} {
			if r := pyClause(t, s, "'"+cmd+"'", mustPassUnittest); r.Passed {
				t.Errorf("%q: planted modules on the path turned a failure into a pass: %s", cmd, r.Detail)
			}
		}
	}
}

// TestMustPassJUnit reads a JUnit report the command writes under /report,
// and refuses one that is missing, a link, or forged next to a failure.
func TestMustPassJUnit(t *testing.T) {
	s := newState(t)
	junit := `<?xml version="1.0"?><testsuites><testsuite name="pytest">` +
		`<testcase classname="tests.test_add" name="test_add"/>` +
		`<testcase classname="tests.test_add" name="test_neg"><failure message="1 != 0"/></testcase>` +
		`<testcase classname="tests.test_add.TestX" name="test_skip"><skipped/></testcase>` +
		`</testsuite></testsuites>`
	write(t, s.task, map[string]string{"tests/report.xml": junit})
	s.env.Scratch = t.TempDir()
	run := func(cmd, mustPass string) Result {
		cl := s.clauses(t, "verify:\n  - kind: tests\n    command: '"+cmd+"'\n    files: ./tests\n    must_pass: ["+mustPass+"]\n    report: junit:/report/out/j.xml\n")[0]
		return Run(context.Background(), s.env, cl)
	}
	cp := "mkdir -p /report/out && cp /tests/report.xml /report/out/j.xml"
	for _, c := range []struct {
		cmd, mustPass string
		want          bool
		detail        string
	}{
		{cp, "tests/test_add.py::test_add", true, "all 1 tests"},
		{cp, "test_add", true, "all 1 tests"},
		{cp + "; exit 1", "test_add", true, "exit 1"},          // other tests may fail: must_pass decides
		{cp, "test_add, test_neg", false, "test_neg (failed)"}, // see also the outcomes below
		{cp, "test_skip", false, "test_skip (skipped)"},
		{cp, "test_gone", false, "not reported at all"},
		{"true", "test_add", false, "/report/out/j.xml was not written"},
		{"mkdir -p /report/out && ln -s /tests/report.xml /report/out/j.xml", "test_add", false, "not a regular file"},
		{"mkdir -p /report/out && echo \"<testsuite><testcase\" > /report/out/j.xml", "test_add", false, "not valid JUnit XML"},
	} {
		r := run(c.cmd, c.mustPass)
		if r.Passed != c.want || !strings.Contains(r.Detail, c.detail) {
			t.Errorf("%s / %s: passed=%v %q, want %v and %q", c.cmd, c.mustPass, r.Passed, r.Detail, c.want, c.detail)
		}
	}
	r := run(cp, "test_add, test_neg, test_gone")
	want := []TestOutcome{{ID: "test_add", Status: "passed"}, {ID: "test_neg", Status: "failed"}, {ID: "test_gone", Status: "not reported"}}
	if !slices.Equal(r.MustPass, want) {
		t.Errorf("outcomes %v, want %v", r.MustPass, want)
	}
	// The report directories do not outlive their clauses.
	if left, _ := os.ReadDir(s.env.Scratch); len(left) != 0 {
		t.Errorf("report directories left behind: %v", left)
	}
}
