package check

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/contract"
)

func TestCheckDeliverables(t *testing.T) {
	dir := taskDir(t)
	input := "name,value\na,1\nb,2\n" // data/data.csv
	type want = map[string]bool
	cases := []struct {
		name string
		decl string // one deliverable, indented by four spaces after the first line
		// file is the content of the deliverable; "<missing>", "<dir>",
		// "<symlink>" (to the input) and "<escape>" (its parent is a symlink
		// out of /outputs) make the file something else.
		file   string
		want   want
		detail string // in the failing finding's detail
	}{
		{"exists", "path: /outputs/a.txt", "x", want{Exists: true}, ""},
		{"missing", "path: /outputs/a.txt\n    non_empty: true", "<missing>", want{Exists: false}, "nothing was written"},
		{"directory", "path: /outputs/a.txt", "<dir>", want{Exists: false}, "not a regular file"},
		{"symlink", "path: /outputs/a.txt\n    non_empty: true", "<symlink>", want{Exists: false}, "symbolic link"},
		{"parent escapes", "path: /outputs/sub/a.txt", "<escape>", want{Exists: false}, "cannot inspect"},
		{"non_empty empty", "path: /outputs/a.txt\n    non_empty: true", "", want{Exists: true, NonEmpty: false}, "0 bytes"},
		{"non_empty blank", "path: /outputs/a.txt\n    non_empty: true", " \n\t\n", want{Exists: true, NonEmpty: false}, "whitespace"},
		{"non_empty ok", "path: /outputs/a.txt\n    non_empty: true", "3\n", want{Exists: true, NonEmpty: true}, ""},
		{"ext md text", "path: /outputs/r.md\n    ext: [.md, txt]", "# Report\n", want{Exists: true, Ext: true}, ""},
		{"ext md binary", "path: /outputs/r.md\n    ext: [.md]", "\x00\xff\xfe", want{Exists: true, Ext: false}, "not UTF-8 text"},
		{"ext json bad", "path: /outputs/r.json\n    ext: [.json]", `{"a":`, want{Exists: true, Ext: false}, "not valid JSON"},
		{"ext json ok", "path: /outputs/r.json\n    ext: [.json]", `{"a":1}`, want{Exists: true, Ext: true}, ""},
		{"ext jsonl bad line", "path: /outputs/r.jsonl\n    ext: [.jsonl]", "{}\n[\n", want{Exists: true, Ext: false}, "line 2"},
		{"ext csv bad", "path: /outputs/t.csv\n    ext: [.csv]", "a,\"b\n", want{Exists: true, Ext: false}, "not valid CSV"},
		{"ext yaml bad", "path: /outputs/c.yaml\n    ext: [.yaml]", "a: [\n", want{Exists: true, Ext: false}, "not valid YAML"},
		{"ext pdf ok", "path: /outputs/p.pdf\n    ext: [.PDF]", "%PDF-1.7\n...", want{Exists: true, Ext: true}, ""},
		{"ext pdf fake", "path: /outputs/p.pdf\n    ext: [.pdf]", "just text", want{Exists: true, Ext: false}, "does not start like a .pdf"},
		{"ext unknown", "path: /outputs/x.bin\n    ext: [.bin]", "\x00", want{Exists: true, Ext: true}, ""},
		{"json_schema ok", "path: /outputs/r.json\n    json_schema: ./schema.json", `{"total": 3}`, want{Exists: true, JSONSchema: true}, ""},
		{"json_schema wrong type", "path: /outputs/r.json\n    json_schema: ./schema.json", `{"total": "3"}`, want{Exists: true, JSONSchema: false}, "total"},
		{"json_schema not json", "path: /outputs/r.json\n    json_schema: ./schema.json", `total: 3`, want{Exists: true, JSONSchema: false}, "not valid JSON"},
		{"json_schema trailing", "path: /outputs/r.json\n    json_schema: ./schema.json", `{"total": 3} {}`, want{Exists: true, JSONSchema: false}, "not valid JSON"},
		{"csv_columns any order", "path: /outputs/t.csv\n    csv_columns: [value, name]", "\uFEFFname , value,extra\n1,2,3\n", want{Exists: true, CSVColumns: true}, ""},
		{"csv_columns missing", "path: /outputs/t.csv\n    csv_columns: [name, value]", "name,total\n", want{Exists: true, CSVColumns: false}, "lacks value; it has name, total"},
		{"csv_columns no header", "path: /outputs/t.csv\n    csv_columns: [name]", "", want{Exists: true, CSVColumns: false}, "no header row"},
		{"csv_columns tsv", "path: /outputs/t.tsv\n    csv_columns: [name, value]", "name\tvalue\n", want{Exists: true, CSVColumns: true}, ""},
		{"min_bytes short", "path: /outputs/a.txt\n    min_bytes: 5", "abcd", want{Exists: true, MinBytes: false}, "4 bytes, at least 5"},
		{"min_bytes ok", "path: /outputs/a.txt\n    min_bytes: 5", "abcde", want{Exists: true, MinBytes: true}, ""},
		{"max_bytes long", "path: /outputs/a.txt\n    max_bytes: 5", "abcdef", want{Exists: true, MaxBytes: false}, "6 bytes, at most 5"},
		{"max_bytes ok", "path: /outputs/a.txt\n    max_bytes: 5", "abcde", want{Exists: true, MaxBytes: true}, ""},
		{"not_equal_input copy", "path: /outputs/t.csv\n    not_equal_input: /inputs/data.csv", input, want{Exists: true, NotEqualInput: false}, "byte-identical to /inputs/data.csv"},
		{"not_equal_input new", "path: /outputs/t.csv\n    not_equal_input: /inputs/data.csv", input + "c,3\n", want{Exists: true, NotEqualInput: true}, ""},
		{"all at once", "path: /outputs/t.csv\n    non_empty: true\n    ext: [.csv]\n    csv_columns: [name]\n    min_bytes: 1\n    max_bytes: 100\n    not_equal_input: /inputs/data.csv",
			"name\nx\n", want{Exists: true, NonEmpty: true, Ext: true, CSVColumns: true, MinBytes: true, MaxBytes: true, NotEqualInput: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := contract.Parse([]byte("inputs: ./data\ndeliverables:\n  - "+tc.decl+"\n"), dir)
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			host := filepath.Join(out, filepath.FromSlash(strings.TrimPrefix(c.Deliverables[0].Path, "/outputs/")))
			switch tc.file {
			case "<missing>":
			case "<dir>":
				must(t, os.MkdirAll(host, 0o755))
			case "<symlink>":
				must(t, os.Symlink(filepath.Join(dir, "data", "data.csv"), host))
			case "<escape>":
				must(t, os.Symlink(filepath.Join(dir, "data"), filepath.Dir(host)))
				must(t, os.WriteFile(filepath.Join(dir, "data", filepath.Base(host)), []byte("x"), 0o644))
			default:
				must(t, os.MkdirAll(filepath.Dir(host), 0o755))
				must(t, os.WriteFile(host, []byte(tc.file), 0o644))
			}
			fs := Deliverables(c, out, c.Inputs)
			got := want{}
			for _, f := range fs {
				if f.Path != c.Deliverables[0].Path {
					t.Errorf("finding for %q", f.Path)
				}
				got[f.Constraint] = f.OK
				if !f.OK && !strings.Contains(f.Detail, tc.detail) {
					t.Errorf("%s detail %q lacks %q", f.Constraint, f.Detail, tc.detail)
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v\n%s", got, tc.want, show(fs))
			}
			if fs[0].Constraint != Exists {
				t.Errorf("first finding is %q, want exists", fs[0].Constraint)
			}
		})
	}
}

func TestCheckDeliverablesOrderAndUnreadableOutputs(t *testing.T) {
	dir := taskDir(t)
	c, err := contract.Parse([]byte("deliverables:\n  - path: /outputs/b.txt\n  - path: /outputs/a.txt\n    non_empty: true\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	writeTree(t, out, map[string]string{"a.txt": "x", "b.txt": "y"})
	fs := Deliverables(c, out, "")
	if len(fs) != 3 || fs[0].Path != "/outputs/b.txt" || fs[1].Path != "/outputs/a.txt" || fs[2].Constraint != NonEmpty {
		t.Errorf("findings out of order:\n%s", show(fs))
	}
	fs = Deliverables(c, filepath.Join(out, "nope"), "")
	if len(fs) != 2 || fs[0].OK || fs[1].OK || !strings.Contains(fs[0].Detail, "outputs directory") {
		t.Errorf("missing outputs dir:\n%s", show(fs))
	}
}

func TestCheckNotEqualInputWithoutInputs(t *testing.T) {
	dir := taskDir(t)
	c, err := contract.Parse([]byte("inputs: ./data\ndeliverables:\n  - path: /outputs/t.csv\n    not_equal_input: /inputs/data.csv\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	writeTree(t, out, map[string]string{"t.csv": "x"})
	fs := Deliverables(c, out, "")
	if len(fs) != 2 || fs[1].OK {
		t.Errorf("no inputs dir must fail not_equal_input:\n%s", show(fs))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func show(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s ok=%v %s\n", f.Path, f.Constraint, f.OK, f.Detail)
	}
	return b.String()
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// taskDir is a task directory with an input and a schema.
func taskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"data/data.csv": "name,value\na,1\nb,2\n",
		"schema.json":   `{"type":"object","required":["total"],"properties":{"total":{"type":"number"}}}`,
	})
	return dir
}
