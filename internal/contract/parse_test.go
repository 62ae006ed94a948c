package contract

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goodTask is the task file of the issue.
const goodTask = `objective: Sum the value column of /inputs/data.csv and explain it
inputs: ./data                 # relative to this file; mounted read-only at /inputs
budget: {turns: 40, tool_calls: 120, tokens: 400000, soft_deadline: 10m, timeout: 15m, concurrency: 4}
deliverables:
  - path: /outputs/sum.txt
    non_empty: true
  - path: /outputs/report.md
    non_empty: true
    ext: [.md]
  - path: /outputs/result.json
    json_schema: ./schema.json
    min_bytes: 2
    max_bytes: 4096
  - path: /outputs/table.csv
    csv_columns: [name, value]
    not_equal_input: /inputs/data.csv
verify:
  - kind: tests                # runs after the agent finished, in a fresh sandbox
    command: sh /tests/check.sh
    files: ./tests
  - kind: recompute
    name: sum
    command: awk -F, 'NR>1{s+=$2} END{print s}' /inputs/data.csv
    compare: /outputs/sum.txt
    tolerance: 1e-9
    timeout: 30s
`

// writeTree creates files (name → content) under dir; a name ending in /
// is a directory.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// taskDir is a task directory with everything goodTask refers to, plus
// some files for the bad cases.
func taskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"data/data.csv":    "name,value\na,1\nb,2\n",
		"data/secret/":     "",
		"tests/check.sh":   "test \"$(cat /outputs/sum.txt)\" = 3\n",
		"schema.json":      `{"type":"object","required":["total"],"properties":{"total":{"type":"number"}}}`,
		"bad-schema.json":  `{"type": 5}`,
		"not-json.json":    `{"type":`,
		"task.yaml":        goodTask,
		"elsewhere/notes/": "",
	})
	return dir
}

func TestParseGood(t *testing.T) {
	dir := taskDir(t)
	c, err := Load(filepath.Join(dir, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.File != filepath.Join(dir, "task.yaml") || c.BaseDir != dir {
		t.Errorf("File %q BaseDir %q", c.File, c.BaseDir)
	}
	if c.Objective != "Sum the value column of /inputs/data.csv and explain it" || c.U0 != "" {
		t.Errorf("objective %q u0 %q", c.Objective, c.U0)
	}
	if c.Inputs != filepath.Join(dir, "data") || c.InputsSpec != "./data" {
		t.Errorf("inputs %q (%q)", c.Inputs, c.InputsSpec)
	}
	want := Budget{Turns: 40, ToolCalls: 120, Tokens: 400000, SoftDeadline: 10 * time.Minute, Timeout: 15 * time.Minute, Concurrency: 4}
	if c.Budget != want {
		t.Errorf("budget %+v, want %+v", c.Budget, want)
	}
	if len(c.Deliverables) != 4 || len(c.Verify) != 2 {
		t.Fatalf("%d deliverables, %d clauses", len(c.Deliverables), len(c.Verify))
	}
	if d := c.Deliverables[1]; d.Path != "/outputs/report.md" || !d.NonEmpty || d.Ext[0] != ".md" || d.Line != 7 {
		t.Errorf("report deliverable %+v", d)
	}
	if d := c.Deliverables[2]; d.JSONSchema != filepath.Join(dir, "schema.json") || d.MinBytes != 2 || d.MaxBytes != 4096 {
		t.Errorf("json deliverable %+v", d)
	}
	if v := c.Verify[0]; v.Kind != KindTests || v.Files != filepath.Join(dir, "tests") || v.Command != "sh /tests/check.sh" {
		t.Errorf("tests clause %+v", v)
	}
	if v := c.Verify[1]; v.Kind != KindRecompute || v.Compare != "/outputs/sum.txt" || *v.Tolerance != 1e-9 || v.Timeout != 30*time.Second || v.Label() != `verify[1] "sum" (recompute)` {
		t.Errorf("recompute clause %+v", v)
	}
	if err := c.RequireObjective(); err != nil {
		t.Error(err)
	}
}

// TestRoundTrip: the canonical JSON holds the contract as written, and the
// hash ignores where the task lives but not what its files say.
func TestRoundTrip(t *testing.T) {
	dir := taskDir(t)
	c, err := Load(filepath.Join(dir, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var w wireContract
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	if w.Objective != c.Objective || w.Inputs != "./data" || w.Budget.Timeout != "15m0s" ||
		len(w.Deliverables) != 4 || w.Deliverables[2].JSONSchema != "./schema.json" || w.Deliverables[2].JSONSchemaSHA256 == "" ||
		len(w.Verify) != 2 || w.Verify[0].Files != "./tests" || w.Verify[0].FilesSHA256 == "" || *w.Verify[1].Tolerance != 1e-9 {
		t.Errorf("canonical JSON lost something: %s", b)
	}
	if strings.Contains(string(b), dir) {
		t.Errorf("canonical JSON holds host paths: %s", b)
	}
	hash := c.Hash()
	if !strings.HasPrefix(hash, "sha256:") || len(hash) != 71 {
		t.Errorf("hash %q", hash)
	}

	other := taskDir(t)
	c2, err := Load(filepath.Join(other, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Hash() != hash {
		t.Error("the same task in another directory hashes differently")
	}
	writeTree(t, other, map[string]string{"tests/check.sh": "exit 0\n"})
	if c3, err := Load(filepath.Join(other, "task.yaml")); err != nil || c3.Hash() == hash {
		t.Errorf("a changed test does not change the hash (err %v)", err)
	}
	c2.SetObjective("  something   else ")
	if c2.Hash() == hash || c2.U0 != "  something   else " || c2.Objective != "something else" || c2.FileObjective == "" {
		t.Errorf("SetObjective: u0 %q objective %q file %q", c2.U0, c2.Objective, c2.FileObjective)
	}
}

func TestObjective(t *testing.T) {
	for in, want := range map[string]string{
		"  Sum   the\tvalues  ":         "Sum the values",
		"a\r\nb\r\n\r\n\r\n\r\nc\n\n":   "a\nb\n\nc",
		"\n\n  - one\n  - two\n":        "- one\n- two",
		"bell\x07 and \x1b[31mred":      "bell and [31mred",
		"bad \xff utf8":                 "bad \uFFFD utf8",
		" \t\n ":                        "",
		"line one  \n\n\n   line two  ": "line one\n\nline two",
	} {
		if got := NormalizeObjective(in); got != want {
			t.Errorf("NormalizeObjective(%q) = %q, want %q", in, got, want)
		}
	}
	dir := taskDir(t)
	c, err := Parse([]byte("deliverables:\n  - path: /outputs/a.txt\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RequireObjective(); err == nil || !strings.Contains(err.Error(), "command line") {
		t.Errorf("RequireObjective without objective: %v", err)
	}
	c.SetObjective("do it")
	if err := c.RequireObjective(); err != nil || c.Objective != "do it" {
		t.Errorf("after SetObjective: %v %q", err, c.Objective)
	}
	if f := FromObjective(" x  y "); f.U0 != " x  y " || f.Objective != "x y" || f.Describe() != "" {
		t.Errorf("FromObjective: %+v", f)
	}
}

func TestDescribe(t *testing.T) {
	dir := taskDir(t)
	c, err := Load(filepath.Join(dir, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Describe()
	for _, want := range []string{"claim_outputs", "- /outputs/sum.txt: non-empty (more than whitespace)", "/outputs/report.md", ".md",
		`"required":["total"]`, "name, value", "2 to 4096 bytes", "must differ from /inputs/data.csv", "2 verification check(s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
	for _, secret := range []string{"check.sh", "awk", "/tests"} {
		if strings.Contains(got, secret) {
			t.Errorf("Describe reveals the verifier (%q):\n%s", secret, got)
		}
	}
}

func TestParseBad(t *testing.T) {
	dir := taskDir(t)
	const d = "deliverables:\n  - path: /outputs/sum.txt\n"
	cases := []struct {
		name, task string
		line       int
		want       string
	}{
		{"unknown key", "objective: x\nfoo: 1\n", 2, "foo: unknown key"},
		{"typo suggests", d + "    non_emtpy: true\n", 3, "did you mean non_empty?"},
		{"duplicate key", "objective: a\nobjective: b\n", 2, "given twice"},
		{"turns not a number", "budget:\n  turns: many\n", 2, "want a whole number"},
		{"quoted number", "budget: {turns: \"40\"}\n", 1, "want a whole number"},
		{"fraction", "budget:\n  concurrency: 1.5\n", 2, "want a whole number"},
		{"negative", "objective: x\nbudget:\n  tool_calls: -1\n", 3, "must not be negative"},
		{"bad duration", "budget:\n  timeout: 15 minutes\n", 2, "not a duration"},
		{"unitless duration", "budget:\n  timeout: 900\n", 2, "with a unit"},
		{"negative duration", "budget:\n  soft_deadline: -1m\n", 2, "must not be negative"},
		{"soft after hard", "budget:\n  timeout: 1m\n  soft_deadline: 2m\n", 3, "after the hard timeout"},
		{"budget not a mapping", "budget: 40\n", 1, "want a mapping"},
		{"objective not a string", "objective: 42\n", 1, "want a string"},
		{"objective empty", "objective:\n", 1, "want a string"},
		{"outside outputs", "deliverables:\n  - path: /etc/passwd\n", 2, "outside /outputs"},
		{"relative path", "deliverables:\n  - path: report.md\n", 2, "not absolute"},
		{"dotdot", "deliverables:\n  - path: /outputs/../etc/passwd\n", 2, "contains .."},
		{"unclean", "deliverables:\n  - path: /outputs//a.txt\n", 2, `as "/outputs/a.txt"`},
		{"outputs itself", "deliverables:\n  - path: /outputs\n", 2, "outputs directory itself"},
		{"scratch", "deliverables:\n  - path: /outputs/scratch/a.txt\n", 2, "never delivered"},
		{"duplicate path", d + "  - path: /outputs/sum.txt\n", 3, "already declared at line 2"},
		{"nested paths", d + "  - path: /outputs/sum.txt/x\n", 3, "nest"},
		{"path missing", "deliverables:\n  - non_empty: true\n", 2, "path is missing"},
		{"deliverables not a list", "deliverables:\n  path: /outputs/a\n", 2, "want a list"},
		{"non_empty yes", d + "    non_empty: yes\n", 3, "want true or false"},
		{"ext mismatch", d + "    ext: [.md]\n", 3, "does not end in .md"},
		{"ext not a list", d + "    ext: .txt\n", 3, "want a list"},
		{"ext with slash", d + "    ext: [a/b]\n", 3, "not a file extension"},
		{"csv columns empty", d + "    csv_columns: []\n", 3, "empty list"},
		{"csv columns repeated", d + "    csv_columns: [a, a]\n", 3, "listed twice"},
		{"schema missing", d + "    json_schema: ./nope.json\n", 3, "does not exist"},
		{"schema invalid", d + "    json_schema: bad-schema.json\n", 3, "not a valid JSON Schema"},
		{"schema not json", d + "    json_schema: not-json.json\n", 3, "not valid JSON"},
		{"min over max", d + "    min_bytes: 10\n    max_bytes: 5\n", 3, "larger than max_bytes"},
		{"max zero", d + "    max_bytes: 0\n", 3, "only an empty file"},
		{"negative size", d + "    min_bytes: -5\n", 3, "must not be negative"},
		{"not_equal_input outside inputs", "inputs: ./data\n" + d + "    not_equal_input: /outputs/x\n", 4, "under /inputs"},
		{"not_equal_input dotdot", "inputs: ./data\n" + d + "    not_equal_input: /inputs/../x\n", 4, "contains .."},
		{"not_equal_input without inputs", d + "    not_equal_input: /inputs/data.csv\n", 3, "needs `inputs:`"},
		{"not_equal_input missing", "inputs: ./data\n" + d + "    not_equal_input: /inputs/nope.csv\n", 4, "not a file in the inputs"},
		{"inputs missing", "inputs: ./nope\n", 1, "does not exist"},
		{"inputs a file", "inputs: ./schema.json\n", 1, "not a directory"},
		{"unknown kind", d + "verify:\n  - kind: essay\n    command: x\n", 4, `unknown kind "essay"`},
		{"rubric without dimensions", d + "verify:\n  - kind: rubric\n", 4, "a rubric needs `dimensions"},
		{"rubric threshold out of range", d + "verify:\n  - kind: rubric\n    dimensions: [{name: clarity, threshold: 11}]\n", 5, "from 0 to 10"},
		{"kind missing", d + "verify:\n  - command: x\n", 4, "kind is missing"},
		{"command missing", d + "verify:\n  - kind: tests\n", 4, "command is missing"},
		{"command empty", d + "verify:\n  - kind: tests\n    command: '  '\n", 5, "is empty"},
		{"recompute without compare", d + "verify:\n  - kind: recompute\n    command: echo 3\n", 4, "needs `compare:"},
		{"compare not a deliverable", d + "verify:\n  - kind: recompute\n    command: echo 3\n    compare: /outputs/other.txt\n", 6, "not a declared deliverable"},
		{"tests with compare", d + "verify:\n  - kind: tests\n    command: 'true'\n    compare: /outputs/sum.txt\n", 6, "only recompute clauses compare"},
		{"tests with tolerance", d + "verify:\n  - kind: tests\n    command: 'true'\n    tolerance: 1\n", 6, "only recompute"},
		{"negative tolerance", d + "verify:\n  - kind: recompute\n    command: echo\n    compare: /outputs/sum.txt\n    tolerance: -1\n", 7, "finite number"},
		{"tests dir missing", d + "verify:\n  - kind: tests\n    command: x\n    files: ./nope\n", 6, "does not exist"},
		{"tests dir inside inputs", "inputs: ./data\n" + d + "verify:\n  - kind: tests\n    command: x\n    files: ./data/secret\n", 7, "which the agent sees"},
		{"verify not a list", d + "verify: {kind: tests}\n", 3, "want a list"},
		{"alias", "objective: &o hi\ninputs: *o\n", 2, "aliases are not supported"},
		{"not yaml", "objective: [\n", 1, "not valid YAML"},
		{"tab indent", "objective: x\n\tinputs: y\n", 2, "not valid YAML"},
		{"empty file", "", 1, "empty"},
		{"only comments", "# nothing\n", 1, "empty"},
		{"null document", "---\n", 1, "empty"},
		{"empty mapping", "{}\n", 1, "declares nothing"},
		{"two documents", "objective: a\n---\nobjective: b\n", 2, "more than one YAML document"},
		{"root is a list", "- objective: a\n", 1, "want a mapping"},
		{"key not a word", "[a]: 1\n", 1, "plain word"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.task), dir)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			if e.Line != tc.line || !strings.Contains(e.Error(), tc.want) {
				t.Errorf("got %q, want line %d and %q", err, tc.line, tc.want)
			}
			if prefix := "task.yaml:"; !strings.HasPrefix(e.Error(), prefix) {
				t.Errorf("error %q does not start with %q", e, prefix)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	task := "objective: x\nfoo: 1\nbudget:\n  turns: -1\ndeliverables:\n  - path: /etc/x\n"
	_, err := Parse([]byte(task), t.TempDir())
	var lines []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		lines = append(lines, e.(*Error).Line)
	}
	if len(lines) != 3 || lines[0] != 2 || lines[1] != 4 || lines[2] != 6 {
		t.Errorf("lines %v, want [2 4 6]: %v", lines, err)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "my-task.yml")
	writeTree(t, dir, map[string]string{"my-task.yml": "objective: x\nbogus: 1\n"})
	if _, err := Load(p); err == nil || !strings.HasPrefix(err.Error(), p+":2: ") {
		t.Errorf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Errorf("Load of a missing file: %v", err)
	}
	big := strings.Repeat("# padding\n", maxTaskFile/10+1)
	writeTree(t, dir, map[string]string{"big.yaml": big})
	if _, err := Load(filepath.Join(dir, "big.yaml")); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Errorf("Load of a big file: %v", err)
	}
}

// A deliverable's kind decides whether synthesis writes it: report always,
// file never, no kind only for .md files; a bad kind names the choices.
func TestDeliverableKind(t *testing.T) {
	dir := t.TempDir()
	c, err := Parse([]byte("objective: o\ndeliverables:\n  - path: /outputs/a.md\n  - path: /outputs/b.txt\n    kind: report\n  - path: /outputs/c.md\n    kind: file\n  - path: /outputs/d.csv\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	for _, d := range c.Deliverables {
		if d.IsReport() {
			reports = append(reports, d.Path)
		}
	}
	if strings.Join(reports, " ") != "/outputs/a.md /outputs/b.txt" {
		t.Errorf("reports %v, want a.md and b.txt", reports)
	}
	raw, err := json.Marshal(c)
	if err != nil || !strings.Contains(string(raw), `"kind":"report"`) {
		t.Errorf("the normalized contract drops the kind: %s %v", raw, err)
	}
	_, err = Parse([]byte("objective: o\ndeliverables:\n  - path: /outputs/a.md\n    kind: essay\n"), dir)
	if err == nil || !strings.Contains(err.Error(), "use report") {
		t.Errorf("bad kind: %v", err)
	}
}

// mcp names the configured MCP servers a task's agents get; it is part of
// the canonical contract (and so of its hash) only when given.
func TestParseMCPServers(t *testing.T) {
	c, err := Parse([]byte("objective: look it up\nmcp: [docs, tracker]\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.MCP, ",") != "docs,tracker" {
		t.Fatalf("mcp %v", c.MCP)
	}
	raw, _ := c.MarshalJSON()
	if !strings.Contains(string(raw), `"mcp":["docs","tracker"]`) {
		t.Fatalf("canonical JSON %s", raw)
	}
	plain, _ := Parse([]byte("objective: look it up\n"), t.TempDir())
	if raw, _ := plain.MarshalJSON(); strings.Contains(string(raw), `"mcp"`) {
		t.Fatalf("a task without mcp: %s", raw)
	}
	for body, want := range map[string]string{
		"objective: x\nmcp: docs\n":         "mcp: want a list",
		"objective: x\nmcp: [docs, docs]\n": `"docs" is listed twice`,
		"objective: x\nmcp: []\n":           "empty list",
	} {
		if _, err := Parse([]byte(body), t.TempDir()); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "task.yaml:2") {
			t.Errorf("%q: got %v, want %q at line 2", body, err, want)
		}
	}
}
