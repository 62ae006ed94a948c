package contract

import (
	"fmt"
	"path"
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
	m, ok := p.fields(e, where, "kind", "name", "command", "files", "compare", "tolerance", "timeout", "must_pass", "report")
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
	p.testReport(m, e, where, &cl)
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

// testReport reads must_pass and report: a tests clause that lists the
// tests that must pass, and where the test runner reports them.
func (p *parser) testReport(m map[string]*yaml.Node, e *yaml.Node, where string, cl *Clause) {
	mp, rp := m["must_pass"], m["report"]
	if mp == nil && rp == nil {
		return
	}
	if cl.Kind != KindTests {
		p.fail(e, "%s: must_pass and report belong to tests clauses; remove them or use kind: tests", where)
		return
	}
	if mp == nil {
		p.fail(rp, "%s.report: give must_pass too, the test ids that must be reported passed", where)
		return
	}
	if rp == nil {
		p.fail(mp, "%s: must_pass needs `report: pytest`, `report: unittest` or `report: junit:%s/FILE.xml`, where the command reports its tests", where, ReportDir)
		return
	}
	if ids, ok := p.strList(mp, where+".must_pass"); ok {
		if len(ids) > MaxMustPass {
			p.fail(mp, "%s.must_pass: %d test ids, more than the cap of %d; list the tests that decide the task, or split the clause", where, len(ids), MaxMustPass)
		}
		cl.MustPass = ids
	}
	r, ok := p.str(rp, where+".report")
	if !ok {
		return
	}
	r = strings.TrimSpace(r)
	switch {
	case r == ReportPytest || r == ReportUnittest:
	case strings.HasPrefix(r, ReportJUnit):
		f := strings.TrimPrefix(r, ReportJUnit)
		if rel, ok := strings.CutPrefix(f, ReportDir+"/"); !ok || path.Clean(f) != f || rel == "" {
			p.fail(rp, "%s.report: %q: the JUnit file must be a clean path under %s (the clause's writable report directory), e.g. junit:%s/junit.xml", where, r, ReportDir, ReportDir)
			return
		}
	default:
		p.fail(rp, "%s.report: unknown report %q; supported: pytest, unittest, junit:%s/FILE.xml", where, r, ReportDir)
		return
	}
	cl.Report = r
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
