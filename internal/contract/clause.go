package contract

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

func (p *parser) clauses(n *yaml.Node, c *Contract) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "verify: want a list of entries like `- kind: tests`, got %s", describe(n))
		return
	}
	for i, e := range n.Content {
		if cl, ok := p.clause(e, i, c); ok {
			c.Verify = append(c.Verify, cl)
		}
	}
}

func (p *parser) clause(e *yaml.Node, i int, c *Contract) (Clause, bool) {
	where := fmt.Sprintf("verify[%d]", i)
	switch k := kindOf(e); k {
	case KindSourceAlignment:
		return p.alignClause(e, i, c)
	case KindRubric, KindHuman:
		return p.rubricClause(e, i, k)
	}
	m, ok := p.fields(e, where, "kind", "name", "command", "files", "compare", "tolerance", "timeout")
	if !ok {
		return Clause{}, false
	}
	cl := Clause{Index: i, Line: e.Line}
	ok = true
	if v := m["kind"]; v == nil {
		p.fail(e, "%s: kind is missing; add `kind: tests` or `kind: recompute`", where)
		ok = false
	} else if s, good := p.str(v, where+".kind"); good && (s == KindTests || s == KindRecompute) {
		cl.Kind = s
	} else {
		if good {
			p.fail(v, "%s.kind: unknown kind %q; supported: tests, recompute, source_alignment, rubric, human", where, s)
		}
		ok = false
	}
	if v := m["name"]; v != nil {
		cl.Name, _ = p.str(v, where+".name")
	}
	if v := m["command"]; v == nil {
		p.fail(e, "%s: command is missing; add `command: ...` (run by sh -c)", where)
		ok = false
	} else if s, good := p.str(v, where+".command"); good {
		cl.Command = strings.TrimSpace(s)
	} else {
		ok = false
	}
	if v := m["files"]; v != nil {
		p.files(v, where+".files", c, &cl)
	}
	if v := m["timeout"]; v != nil {
		cl.Timeout, _ = p.duration(v, where+".timeout")
	}
	if v := m["tolerance"]; v != nil {
		if cl.Kind == KindTests {
			p.fail(v, "%s.tolerance: only recompute clauses compare numbers; remove it", where)
		} else if t, good := p.tolerance(v, where+".tolerance"); good {
			cl.Tolerance = &t
		}
	}
	v := m["compare"]
	switch {
	case cl.Kind == KindTests && v != nil:
		p.fail(v, "%s.compare: only recompute clauses compare; remove it or use kind: recompute", where)
	case cl.Kind == KindRecompute && v == nil:
		p.fail(e, "%s: a recompute clause needs `compare: /outputs/FILE`, the deliverable its output must equal", where)
	case cl.Kind == KindRecompute:
		if s, good := p.str(v, where+".compare"); good {
			if !slices.ContainsFunc(c.Deliverables, func(d Deliverable) bool { return d.Path == s }) {
				p.fail(v, "%s.compare: %s is not a declared deliverable; declare it under deliverables or compare one that is", where, s)
			}
			cl.Compare = s
		}
	}
	return cl, ok
}

func (p *parser) files(n *yaml.Node, name string, c *Contract, cl *Clause) {
	d, ok := p.dir(n, name)
	if !ok {
		return
	}
	if c.Inputs != "" && within(d, c.Inputs) {
		p.fail(n, "%s: %s is inside the inputs directory %s, which the agent sees; keep verifier files outside it", name, d, c.Inputs)
		return
	}
	digest, err := treeDigest(d)
	if err != nil {
		p.fail(n, "%s: %v", name, err)
		return
	}
	cl.Files, cl.FilesSpec, cl.filesDigest = d, n.Value, digest
}

// within reports whether dir is parent or inside it, symlinks resolved.
func within(dir, parent string) bool {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	if r, err := filepath.EvalSymlinks(parent); err == nil {
		parent = r
	}
	rel, err := filepath.Rel(parent, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
