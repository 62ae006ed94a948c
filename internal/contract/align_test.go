package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCorpusAndSourceAlignment(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "docs"), 0o755)
	c, err := Parse([]byte(`objective: answer from the documents
corpus: ./docs
deliverables:
  - path: /outputs/answer.md
verify:
  - kind: source_alignment
    name: quotes match
    files: [/outputs/answer.md]
    min_citations: 2
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Corpus != filepath.Join(dir, "docs") || c.CorpusSpec != "./docs" {
		t.Errorf("corpus %q %q", c.Corpus, c.CorpusSpec)
	}
	cl := c.Verify[0]
	if cl.Kind != KindSourceAlignment || cl.Name != "quotes match" || len(cl.Outputs) != 1 || cl.Outputs[0] != "/outputs/answer.md" || cl.MinCitations != 2 {
		t.Errorf("clause %+v", cl)
	}
	// The hash covers the clause's files and minimum.
	b, _ := c.MarshalJSON()
	if !strings.Contains(string(b), `"outputs":["/outputs/answer.md"],"min_citations":2`) || !strings.Contains(string(b), `"corpus":"./docs"`) {
		t.Errorf("canonical JSON lacks the evidence fields: %s", b)
	}

	for _, bad := range []struct{ yaml, want string }{
		{"corpus: ./nope\n", "corpus: directory"},
		{"verify:\n  - kind: source_alignment\n", "needs `files: [/outputs/FILE, ...]`"},
		{"verify:\n  - kind: source_alignment\n    files: [/workspace/a.md]\n", "files[0]"},
		{"verify:\n  - kind: source_alignment\n    files: [/outputs/a.md]\n    command: true\n", "command"},
		{"verify:\n  - kind: source_alignment\n    files: [/outputs/a.md]\n    min_citations: -1\n", "must not be negative"},
	} {
		_, err := Parse([]byte("objective: x\n"+bad.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
