package contract

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// kindOf is the kind a clause entry declares, or "".
func kindOf(e *yaml.Node) string {
	if e.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(e.Content); i += 2 {
		if e.Content[i].Value == "kind" && e.Content[i+1].Kind == yaml.ScalarNode {
			return e.Content[i+1].Value
		}
	}
	return ""
}

// alignClause reads a source_alignment clause: files, a list of /outputs
// deliverables whose [E12] citations are checked against the run's
// evidence, and optional min_citations. It runs no command.
func (p *parser) alignClause(e *yaml.Node, i int, c *Contract) (Clause, bool) {
	where := fmt.Sprintf("verify[%d]", i)
	m, ok := p.fields(e, where, "kind", "name", "files", "min_citations")
	if !ok {
		return Clause{}, false
	}
	cl := Clause{Index: i, Line: e.Line, Kind: KindSourceAlignment}
	if v := m["name"]; v != nil {
		cl.Name, _ = p.str(v, where+".name")
	}
	v := m["files"]
	if v == nil {
		p.fail(e, "%s: a source_alignment clause needs `files: [/outputs/FILE, ...]`, the deliverables whose citations it checks", where)
		return cl, false
	}
	files, good := p.strList(v, where+".files")
	if !good {
		return cl, false
	}
	for j, f := range files {
		if msg := outputPath(f); msg != "" {
			p.fail(v.Content[j], "%s.files[%d]: %s", where, j, msg)
			ok = false
		}
	}
	cl.Outputs = files
	if v := m["min_citations"]; v != nil {
		n, good := p.count(v, where+".min_citations")
		ok = ok && good
		cl.MinCitations = int(n)
	}
	return cl, ok
}

// corpus reads the corpus key: a directory of documents, searched at
// /inputs/corpus.
func (p *parser) corpus(n *yaml.Node, c *Contract) {
	if d, ok := p.dir(n, "corpus"); ok {
		c.Corpus, c.CorpusSpec = d, n.Value
	}
}
