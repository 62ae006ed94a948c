package contract

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func deliverablesYAML(n int) string {
	var b strings.Builder
	b.WriteString("deliverables:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - path: /outputs/f%d.txt\n", i)
	}
	return b.String()
}

// TestCaps tries to get past each cap of a task: the deliverables cap, the
// task's own raise of it, must_pass ids, and the task file size.
func TestCaps(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, task string
		err        []string // fragments; none means it parses
		cap        int
	}{
		{"at the cap", deliverablesYAML(DefaultMaxDeliverables), nil, DefaultMaxDeliverables},
		{"over the cap", deliverablesYAML(DefaultMaxDeliverables + 1), []string{"1001 entries, more than the cap of 1000 per contract", "limits: {deliverables: 1001}"}, 0},
		{"raised", "limits: {deliverables: 1500}\n" + deliverablesYAML(1500), nil, 1500},
		{"raised, still over", "limits: {deliverables: 1200}\n" + deliverablesYAML(1201), []string{"more than the cap of 1200"}, 0},
		{"raise past the hard cap", "limits: {deliverables: 10001}\n" + deliverablesYAML(1), []string{"limits.deliverables: 10001 is outside 1..10000"}, 0},
		{"far over the hard cap", "limits: {deliverables: 10000}\n" + deliverablesYAML(10001), []string{"10000 is the most a task file may raise it to"}, 0},
		{"zero limit", "limits: {deliverables: 0}\n" + deliverablesYAML(1), []string{"outside 1..10000"}, 0},
		{"unknown limit", "limits: {files: 3}\n" + deliverablesYAML(1), []string{"limits.files: unknown key"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(c.task), dir)
			if len(c.err) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got.DeliverableCap() != c.cap {
					t.Fatalf("cap %d, want %d", got.DeliverableCap(), c.cap)
				}
				return
			}
			if err == nil {
				t.Fatal("parsed")
			}
			for _, f := range c.err {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q lacks %q", err, f)
				}
			}
		})
	}
	if (*Contract)(nil).DeliverableCap() != DefaultMaxDeliverables || FromObjective("x").DeliverableCap() != DefaultMaxDeliverables {
		t.Fatal("a contract without a task file has not the default cap")
	}
	// A raised cap is part of the contract's hash; the default is not.
	a, _ := Parse([]byte(deliverablesYAML(1)), dir)
	b, _ := Parse([]byte("limits: {deliverables: 1000}\n"+deliverablesYAML(1)), dir)
	r, _ := Parse([]byte("limits: {deliverables: 2000}\n"+deliverablesYAML(1)), dir)
	if a.Hash() != b.Hash() || a.Hash() == r.Hash() {
		t.Fatal("limits.deliverables and the hash disagree")
	}
}

func TestTaskFileCap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(p, []byte("objective: x\n"+strings.Repeat("# pad\n", MaxTaskFile/6+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB, the cap on task files") || !strings.Contains(err.Error(), "inputs directory") {
		t.Fatalf("Load: %v", err)
	}
}

func TestMustPassParse(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "tests"), 0o755)
	head := "deliverables:\n  - path: /outputs/a.txt\nverify:\n  - kind: "
	cases := []struct {
		name, clause string
		err          string
	}{
		{"pytest", "tests\n    command: pytest -rA\n    must_pass: [test_a.py::test_x]\n    report: pytest\n", ""},
		{"unittest", "tests\n    command: python3 -m unittest -v\n    must_pass: [test_x]\n    report: unittest\n", ""},
		{"junit", "tests\n    command: pytest --junitxml=/report/j.xml\n    must_pass: [test_x]\n    report: junit:/report/j.xml\n", ""},
		{"junit outside the report dir", "tests\n    command: x\n    must_pass: [t]\n    report: junit:/outputs/j.xml\n", "clean path under /report"},
		{"junit climbing", "tests\n    command: x\n    must_pass: [t]\n    report: junit:/report/../outputs/j.xml\n", "clean path under /report"},
		{"junit dir itself", "tests\n    command: x\n    must_pass: [t]\n    report: junit:/report/\n", "clean path under /report"},
		{"unknown report", "tests\n    command: x\n    must_pass: [t]\n    report: tap\n", "unknown report \"tap\""},
		{"must_pass without report", "tests\n    command: x\n    must_pass: [t]\n", "must_pass needs `report: pytest`"},
		{"report without must_pass", "tests\n    command: x\n    report: pytest\n", "give must_pass too"},
		{"empty must_pass", "tests\n    command: x\n    must_pass: []\n    report: pytest\n", "empty list"},
		{"repeated id", "tests\n    command: x\n    must_pass: [a, a]\n    report: pytest\n", "listed twice"},
		{"on recompute", "recompute\n    command: x\n    compare: /outputs/a.txt\n    must_pass: [a]\n    report: pytest\n", "belong to tests clauses"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse([]byte(head+c.clause), dir)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cl := got.Verify[0]; len(cl.MustPass) != 1 || cl.Report == "" {
					t.Fatalf("clause %+v", cl)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
	var ids strings.Builder
	for i := range MaxMustPass + 1 {
		fmt.Fprintf(&ids, "t%d, ", i)
	}
	_, err := Parse([]byte(head+"tests\n    command: x\n    must_pass: ["+ids.String()+"]\n    report: pytest\n"), dir)
	if err == nil || !strings.Contains(err.Error(), "more than the cap of 10000") {
		t.Fatalf("must_pass cap: %v", err)
	}
}
