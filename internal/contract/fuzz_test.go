package contract

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics, rejects only with *Error values that carry
// the file name, and what it accepts can be hashed and described.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		goodTask,
		"objective: x\n",
		"deliverables:\n  - path: /outputs/a.txt\n    ext: [.md]\n",
		"budget: {turns: 1, timeout: 1h}\n",
		"verify:\n  - kind: recompute\n    command: echo\n    compare: /outputs/a\n",
		"objective: &a [*a]\n",
		"a: !!binary aGVsbG8=\n",
		"? [a, b]\n: c\n",
		"objective: \"\\x00\"\n",
		"--- |\n  text\n",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	for name, content := range map[string]string{
		"data/data.csv": "name,value\n", "tests/check.sh": "true\n",
		"schema.json": `{"type":"object"}`, "bad-schema.json": `{"type": 5}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, dir)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "task.yaml" {
				t.Fatalf("error %T %q is not an *Error naming the file", err, err)
			}
			return
		}
		_ = c.Hash()
		_ = c.Describe()
		for _, d := range c.Deliverables {
			if outputPath(d.Path) != "" {
				t.Fatalf("accepted a bad path %q", d.Path)
			}
		}
	})
}
