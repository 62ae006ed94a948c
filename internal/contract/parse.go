package contract

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/apodex/apodex/internal/bytesize"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

func parse(name string, data []byte, baseDir string, opt Options) (c *Contract, err error) {
	defer func() {
		if r := recover(); r != nil { // a bug in a library must not kill the CLI
			c, err = nil, &Error{File: name, Msg: fmt.Sprintf("cannot parse the task file: internal error: %v", r)}
		}
	}()
	if len(data) > maxTaskFile {
		return nil, &Error{File: name, Msg: fmt.Sprintf("the task file is larger than 1 MiB, the cap on task files (contract.MaxTaskFile, %d bytes; it is fixed): keep large data in the inputs directory and refer to it from the objective", maxTaskFile)}
	}
	base, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, &Error{File: name, Msg: fmt.Sprintf("base directory: %v", err)}
	}
	root, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	p := &parser{file: name, base: base, allowOutside: opt.AllowOutside}
	c = &Contract{BaseDir: base}
	p.contract(root, c)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decode reads exactly one YAML document.
func decode(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Line: 1, Msg: "the task file is empty; give at least an objective or deliverables"}
		}
		msg := strings.SplitN(err.Error(), "\n", 2)[0]
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &Error{File: name, Line: line, Msg: "not valid YAML: " + m[2]}
		}
		return nil, &Error{File: name, Line: 1, Msg: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{File: name, Line: max(extra.Line, 1), Msg: "more than one YAML document (---); a task file holds one"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Tag == "!!null" {
		return nil, &Error{File: name, Line: 1, Msg: "the task file is empty; give at least an objective or deliverables"}
	}
	return doc.Content[0], nil
}

func (p *parser) contract(root *yaml.Node, c *Contract) {
	m, ok := p.fields(root, "", "objective", "inputs", "corpus", "budget", "deliverables", "verify", "limits", "mcp")
	if !ok {
		return
	}
	c.MaxDeliverables = DefaultMaxDeliverables
	if n := m["limits"]; n != nil {
		p.limits(n, c)
	}
	if n := m["objective"]; n != nil {
		if s, ok := p.str(n, "objective"); ok {
			c.FileObjective, c.Objective = s, NormalizeObjective(s)
		}
	}
	if n := m["inputs"]; n != nil {
		p.inputs(n, c)
	}
	if n := m["corpus"]; n != nil {
		p.corpus(n, c)
	}
	if n := m["budget"]; n != nil {
		p.budget(n, &c.Budget)
	}
	if n := m["mcp"]; n != nil {
		c.MCP, _ = p.strList(n, "mcp")
	}
	if n := m["deliverables"]; n != nil {
		p.deliverables(n, c)
	}
	if n := m["verify"]; n != nil {
		p.clauses(n, c)
	}
	if len(m) == 0 {
		p.fail(root, "the task file declares nothing; give at least an objective or deliverables")
	}
}

// limits reads the task's own caps.
func (p *parser) limits(n *yaml.Node, c *Contract) {
	m, ok := p.fields(n, "limits", "deliverables")
	if !ok {
		return
	}
	if v := m["deliverables"]; v != nil {
		d, good := p.count(v, "limits.deliverables")
		switch {
		case !good:
		case d < 1 || d > HardMaxDeliverables:
			p.fail(v, "limits.deliverables: %d is outside 1..%d", d, HardMaxDeliverables)
		default:
			c.MaxDeliverables = int(d)
		}
	}
}

// host resolves a path from the task file against its directory.
func (p *parser) host(s string) string {
	if filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return filepath.Join(p.base, s)
}

// dir resolves a directory that must exist.
func (p *parser) dir(n *yaml.Node, name string) (string, bool) {
	s, ok := p.str(n, name)
	if !ok {
		return "", false
	}
	d := p.host(s)
	if !p.confine(n, name, s, d) {
		return "", false
	}
	fi, err := os.Stat(d)
	switch {
	case err != nil:
		p.fail(n, "%s: directory %s does not exist (relative paths start at the task file's directory %s); create it or fix the path", name, d, p.base)
		return "", false
	case !fi.IsDir():
		p.fail(n, "%s: %s is not a directory; name the directory that holds the files", name, d)
		return "", false
	}
	return d, true
}

func (p *parser) inputs(n *yaml.Node, c *Contract) {
	if d, ok := p.dir(n, "inputs"); ok {
		c.Inputs, c.InputsSpec = d, n.Value
	}
}

func (p *parser) budget(n *yaml.Node, b *Budget) {
	m, ok := p.fields(n, "budget", "turns", "tool_calls", "tokens", "soft_deadline", "timeout", "concurrency", "mem_limit", "pids_limit", "tmp_size", "workspace_quota")
	if !ok {
		return
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"turns", &b.Turns}, {"tool_calls", &b.ToolCalls}, {"tokens", &b.Tokens}, {"concurrency", &b.Concurrency}} {
		if v := m[f.key]; v != nil {
			if x, ok := p.count(v, "budget."+f.key); ok {
				*f.dst = int(x)
			}
		}
	}
	if v := m["pids_limit"]; v != nil {
		if x, ok := p.count(v, "budget.pids_limit"); ok {
			b.PidsLimit = int64(x)
		}
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"mem_limit", &b.MemLimit}, {"tmp_size", &b.TmpSize}, {"workspace_quota", &b.WorkspaceQuota}} {
		if v := m[f.key]; v != nil {
			n, err := bytesize.Parse(v.Value)
			if err != nil || v.Kind != yaml.ScalarNode || n <= 0 {
				p.fail(v, "budget.%s: want a positive size such as 256MiB or 4GiB, got %s", f.key, describe(v))
				continue
			}
			if strings.TrimRight(strings.TrimSpace(v.Value), "0123456789.") == "" { // 5 would silently be 5 bytes
				p.fail(v, "budget.%s: a size needs its unit, such as 256MiB or 4GiB (bytes say so: %sB), got %s", f.key, strings.TrimSpace(v.Value), describe(v))
				continue
			}
			*f.dst = n
		}
	}
	if v := m["soft_deadline"]; v != nil {
		b.SoftDeadline, _ = p.duration(v, "budget.soft_deadline")
	}
	if v := m["timeout"]; v != nil {
		b.Timeout, _ = p.duration(v, "budget.timeout")
	}
	if b.SoftDeadline > 0 && b.Timeout > 0 && b.SoftDeadline > b.Timeout {
		p.fail(m["soft_deadline"], "budget.soft_deadline: %s is after the hard timeout %s; make it shorter than the timeout", b.SoftDeadline, b.Timeout)
	}
}

func (p *parser) deliverables(n *yaml.Node, c *Contract) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "deliverables: want a list of entries like `- path: /outputs/report.md`, got %s", describe(n))
		return
	}
	if len(n.Content) > c.MaxDeliverables {
		hint := fmt.Sprintf("raise it with `limits: {deliverables: %d}` in the task file (at most %d)", len(n.Content), HardMaxDeliverables)
		if len(n.Content) > HardMaxDeliverables {
			hint = fmt.Sprintf("%d is the most a task file may raise it to", HardMaxDeliverables)
		}
		p.fail(n, "deliverables: %d entries, more than the cap of %d per contract; deliver fewer, larger files (a table, an archive) or %s", len(n.Content), c.MaxDeliverables, hint)
		return
	}
	for i, e := range n.Content {
		if d, ok := p.deliverable(e, fmt.Sprintf("deliverables[%d]", i), c); ok {
			c.Deliverables = append(c.Deliverables, d)
		}
	}
}

// deliverable parses one entry; ok means its path is valid and new, so
// later checks (compare) can refer to it even if a constraint was wrong.
func (p *parser) deliverable(e *yaml.Node, where string, c *Contract) (Deliverable, bool) {
	m, ok := p.fields(e, where, "path", "kind", "non_empty", "ext", "json_schema", "csv_columns", "min_bytes", "max_bytes", "not_equal_input")
	if !ok {
		return Deliverable{}, false
	}
	d := Deliverable{Line: e.Line}
	if pn := m["path"]; pn == nil {
		p.fail(e, "%s: path is missing; add `path: /outputs/NAME`", where)
	} else if s, ok := p.str(pn, where+".path"); ok {
		if msg := outputPath(s); msg != "" {
			p.fail(pn, "%s.path: %s", where, msg)
		} else if other := conflict(c.Deliverables, s); other != "" {
			p.fail(pn, "%s.path: %s", where, other)
		} else {
			d.Path = s
		}
	}
	if v := m["kind"]; v != nil {
		if s, ok := p.str(v, where+".kind"); ok {
			if s != KindReport && s != KindFile {
				p.fail(v, "%s.kind: %q is not a deliverable kind; use report (a writer writes it from the claim graph in team synthesis) or file", where, s)
			} else {
				d.Kind = s
			}
		}
	}
	if v := m["non_empty"]; v != nil {
		d.NonEmpty, _ = p.boolean(v, where+".non_empty")
	}
	if v := m["ext"]; v != nil {
		p.ext(v, where+".ext", &d)
	}
	if v := m["json_schema"]; v != nil {
		if s, ok := p.str(v, where+".json_schema"); ok && p.confine(v, where+".json_schema", s, p.host(s)) {
			if raw, sch, msg := loadSchema(p.host(s), schemaLoader{dir: p.base, allow: p.allowOutside}); msg != "" {
				p.fail(v, "%s.json_schema: %s", where, msg)
			} else {
				d.JSONSchema, d.JSONSchemaSpec, d.schemaRaw, d.schema = p.host(s), s, raw, sch
			}
		}
	}
	if v := m["csv_columns"]; v != nil {
		d.CSVColumns, _ = p.strList(v, where+".csv_columns")
	}
	if v := m["min_bytes"]; v != nil {
		d.MinBytes, _ = p.count(v, where+".min_bytes")
	}
	if v := m["max_bytes"]; v != nil {
		if x, ok := p.count(v, where+".max_bytes"); ok && x == 0 {
			p.fail(v, "%s.max_bytes: 0 would allow only an empty file; give a positive size or remove it", where)
		} else {
			d.MaxBytes = x
		}
	}
	if d.MaxBytes > 0 && d.MinBytes > d.MaxBytes {
		p.fail(m["min_bytes"], "%s.min_bytes: %d is larger than max_bytes %d; no file can satisfy both", where, d.MinBytes, d.MaxBytes)
	}
	if v := m["not_equal_input"]; v != nil {
		p.notEqualInput(v, where+".not_equal_input", c, &d)
	}
	return d, d.Path != ""
}

// outputPath says what is wrong with a deliverable path, or "".
func outputPath(s string) string {
	switch {
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Sprintf("%q contains control characters", s)
	case !strings.HasPrefix(s, "/"):
		return fmt.Sprintf("%q is not absolute; deliverables are files under /outputs, like /outputs/%s", s, path.Base(s))
	case slices.Contains(strings.Split(s, "/"), ".."):
		return fmt.Sprintf("%q contains ..; name the file under /outputs directly", s)
	case path.Clean(s) != s:
		return fmt.Sprintf("write %q as %q", s, path.Clean(s))
	case s == "/outputs":
		return "/outputs is the outputs directory itself; name a file under it, like /outputs/report.md"
	case !strings.HasPrefix(s, "/outputs/"):
		return fmt.Sprintf("%s is outside /outputs; deliverables must be under /outputs, like /outputs/%s", s, path.Base(s))
	case s == "/outputs/scratch" || strings.HasPrefix(s, "/outputs/scratch/"):
		return fmt.Sprintf("%s is under /outputs/scratch, which is never delivered; choose a path outside scratch", s)
	}
	return ""
}

// conflict says why s cannot join the declared deliverables, or "".
func conflict(ds []Deliverable, s string) string {
	for _, d := range ds {
		switch {
		case d.Path == s:
			return fmt.Sprintf("%s is already declared at line %d; declare each path once", s, d.Line)
		case strings.HasPrefix(s, d.Path+"/") || strings.HasPrefix(d.Path, s+"/"):
			return fmt.Sprintf("%s and %s (line %d) nest, but each deliverable is a file; pick paths that do not contain each other", s, d.Path, d.Line)
		}
	}
	return ""
}

func (p *parser) ext(n *yaml.Node, name string, d *Deliverable) {
	list, ok := p.strList(n, name)
	if !ok {
		return
	}
	for _, e := range list {
		e = strings.ToLower(e)
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		if e == "." || strings.ContainsAny(e, "/\\ ") {
			p.fail(n, "%s: %q is not a file extension; write it like .md", name, e)
			return
		}
		d.Ext = append(d.Ext, e)
	}
	if d.Path != "" && matchExt(d.Path, d.Ext) == "" {
		p.fail(n, "%s: %s does not end in %s; rename the deliverable or fix ext", name, d.Path, strings.Join(d.Ext, " or "))
	}
}

// matchExt is the longest extension in exts that name ends with, or "".
func matchExt(name string, exts []string) string {
	best := ""
	for _, e := range exts {
		if strings.HasSuffix(strings.ToLower(name), e) && len(e) > len(best) {
			best = e
		}
	}
	return best
}

func (p *parser) notEqualInput(n *yaml.Node, name string, c *Contract, d *Deliverable) {
	s, ok := p.str(n, name)
	if !ok {
		return
	}
	switch {
	case slices.Contains(strings.Split(s, "/"), ".."):
		p.fail(n, "%s: %q contains ..; name a file under /inputs directly", name, s)
	case !strings.HasPrefix(s, "/inputs/") || path.Clean(s) != s:
		p.fail(n, "%s: %q is not a clean path of a file under /inputs, like /inputs/data.csv", name, s)
	case c.Inputs == "":
		p.fail(n, "%s: needs `inputs:` (the directory mounted at /inputs) in the task file", name)
	default:
		host := filepath.Join(c.Inputs, filepath.FromSlash(strings.TrimPrefix(s, "/inputs/")))
		if fi, err := os.Stat(host); err != nil || !fi.Mode().IsRegular() {
			p.fail(n, "%s: %s is not a file in the inputs directory (%s); fix the path", name, s, host)
			return
		}
		d.NotEqualInput = s
	}
}
