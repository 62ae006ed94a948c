package contract

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Task paths stay inside the task file's directory (F13): a path outside
// it, or a symbolic link leading out, is refused naming the key, the path
// and the flag; Options.AllowOutside accepts them.
func TestTaskPathsStayInTheTaskDirectory(t *testing.T) {
	base := t.TempDir()
	dir, out := filepath.Join(base, "task"), filepath.Join(base, "elsewhere")
	writeTree(t, dir, map[string]string{"data/a.csv": "x", "tests/check.sh": "true", "schema.json": `{"type": "object"}`,
		"refs.json": `{"$ref": "../elsewhere/schema.json"}`, "docs/a.md": "# a"})
	writeTree(t, out, map[string]string{"data/a.csv": "secret", "schema.json": `{"type": "object"}`})
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	os.Symlink(filepath.Join(out, "data"), filepath.Join(dir, "linked"))
	os.Symlink(filepath.Join(out, "schema.json"), filepath.Join(dir, "linked.json"))
	os.Symlink("data", filepath.Join(dir, "near")) // a link that stays inside
	d := "deliverables:\n  - path: /outputs/r.json\n    json_schema: "
	v := "verify:\n  - kind: tests\n    command: sh check.sh\n    files: "
	cases := []struct {
		name, task, key, path string // key, path: what the refusal names ("" accepted)
	}{
		{"inputs inside", "inputs: ./data\n", "", ""},
		{"inputs through a link that stays inside", "inputs: ./near\n", "", ""},
		{"inputs /etc", "inputs: /etc\n", "inputs", "/etc"},
		{"inputs ../", "inputs: ../elsewhere/data\n", "inputs", "../elsewhere/data"},
		{"inputs absolute elsewhere", "inputs: " + filepath.Join(out, "data") + "\n", "inputs", filepath.Join(out, "data")},
		{"inputs through a link to /etc", "inputs: ./etc\n", "inputs", "./etc"},
		{"inputs through a link out", "inputs: linked\n", "inputs", "linked"},
		{"corpus /etc", "corpus: /etc\n", "corpus", "/etc"},
		{"corpus inside", "corpus: docs\n", "", ""},
		{"files elsewhere", v + filepath.Join(out, "data") + "\n", "verify[0].files", filepath.Join(out, "data")},
		{"files through a link", v + "./linked\n", "verify[0].files", "./linked"},
		{"files inside", v + "tests\n", "", ""},
		{"json_schema ../", d + "../elsewhere/schema.json\n", "deliverables[0].json_schema", "../elsewhere/schema.json"},
		{"json_schema through a link", d + "linked.json\n", "deliverables[0].json_schema", "linked.json"},
		{"json_schema $ref out", d + "refs.json\n", "deliverables[0].json_schema", "$ref"},
		{"json_schema inside", d + "schema.json\n", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.task), dir)
			if c.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("accepted, or not an *Error: %v", err)
			}
			for _, want := range []string{c.key + ": ", c.path, OutsideFlag} {
				if !strings.Contains(e.Msg, want) {
					t.Errorf("%q does not name %q", e.Msg, want)
				}
			}
			if _, err := ParseWith([]byte(c.task), dir, Options{AllowOutside: true}); err != nil {
				t.Errorf("refused with AllowOutside: %v", err)
			}
		})
	}
}
