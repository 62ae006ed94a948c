package record_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
)

// TestDocsNameEveryType fails when an event type of the catalogue, or a
// field of its payload, has no place in docs/record.md.
func TestDocsNameEveryType(t *testing.T) {
	doc, err := os.ReadFile("../../docs/record.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	parts := regexp.MustCompile("(?m)^### `([a-z_]+)`").FindAllSubmatchIndex(doc, -1)
	for i, p := range parts {
		end := len(doc)
		if i+1 < len(parts) {
			end = parts[i+1][0]
		}
		sections[string(doc[p[2]:p[3]])] = string(doc[p[0]:end])
	}
	for _, typ := range record.Types() {
		sec, ok := sections[typ]
		if !ok {
			t.Errorf("docs/record.md has no section \"### `%s`\"", typ)
			continue
		}
		p, err := record.DecodePayload(record.Event{Seq: 1, Type: typ, Raw: []byte(`{}`)})
		if err != nil {
			t.Fatalf("decode an empty %s: %v", typ, err)
		}
		for _, f := range jsonFields(reflect.TypeOf(p).Elem()) {
			if !strings.Contains(sec, "`"+f+"`") {
				t.Errorf("docs/record.md, section %s: field `%s` is not documented", typ, f)
			}
		}
	}
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func TestDecodePayload(t *testing.T) {
	p, err := record.DecodePayload(record.Event{Seq: 4, Type: record.TypeLease, Raw: []byte(`{"seq":4,"type":"lease","agent":"main","action":"granted","paths":["/outputs/a"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := p.(*record.Lease); !ok || l.Action != "granted" || len(l.Paths) != 1 {
		t.Fatalf("payload %#v", p)
	}
	_, err = record.DecodePayload(record.Event{Seq: 9, Type: "hologram", Raw: []byte(`{}`)})
	if !errors.Is(err, record.ErrUnknownType) || !strings.Contains(err.Error(), `"hologram" at seq 9`) {
		t.Fatalf("unknown type: %v", err)
	}
	_, err = record.DecodePayload(record.Event{Seq: 3, Type: record.TypeToolCall, Raw: []byte(`{"turn":"x"}`)})
	if err == nil || !strings.Contains(err.Error(), "seq 3") {
		t.Fatalf("bad payload: %v", err)
	}
}

func TestSettingsDurationsAreStrings(t *testing.T) {
	var d record.Duration
	if err := d.UnmarshalText([]byte("5m0s")); err != nil || d.D().String() != "5m0s" {
		t.Fatalf("duration %v %v", d, err)
	}
	b, _ := d.MarshalText()
	if string(b) != "5m0s" {
		t.Fatalf("marshal %s", b)
	}
	if d.UnmarshalText([]byte("300000000000")) == nil {
		t.Fatal("nanoseconds accepted")
	}
}

// TestTypesDeclaredOnlyHere fails when code outside internal/record declares
// an event type string: a Type…/Event… constant whose value is a catalogue
// type, a literal type passed to Append, or a literal compared with or
// switched on an event's Type.
func TestTypesDeclaredOnlyHere(t *testing.T) {
	known := map[string]bool{}
	for _, typ := range record.Types() {
		known[typ] = true
	}
	root := "../.."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); strings.HasPrefix(n, ".") && path != root || path == filepath.Join(root, "internal", "record") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		lit := func(e ast.Expr) (string, bool) {
			b, ok := e.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return "", false
			}
			s, _ := strconv.Unquote(b.Value)
			return s, known[s]
		}
		isType := func(e ast.Expr) bool {
			s, ok := e.(*ast.SelectorExpr)
			return ok && s.Sel.Name == "Type"
		}
		report := func(n ast.Node, what, typ string) {
			t.Errorf("%s: %s %q: declare event types in internal/record and use record.Type…", fset.Position(n.Pos()), what, typ)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) && (strings.HasPrefix(name.Name, "Type") || strings.HasPrefix(name.Name, "Event")) {
						if s, ok := lit(n.Values[i]); ok {
							report(n, "constant "+name.Name, s)
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Append" && len(n.Args) == 3 {
					if s, ok := lit(n.Args[0]); ok {
						report(n, "Append of", s)
					}
				}
			case *ast.BinaryExpr:
				if isType(n.X) || isType(n.Y) {
					for _, e := range []ast.Expr{n.X, n.Y} {
						if s, ok := lit(e); ok {
							report(n, "comparison with", s)
						}
					}
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && isType(n.Tag) {
					for _, c := range n.Body.List {
						for _, e := range c.(*ast.CaseClause).List {
							if s, ok := lit(e); ok {
								report(e, "case", s)
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEveryTypeConstantRegistered fails when a Type… constant of
// internal/record names a type the catalogue does not decode: such events
// would be skipped by readers and refused by resume as unknown.
func TestEveryTypeConstantRegistered(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(node ast.Node) bool {
				vs, ok := node.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !strings.HasPrefix(name.Name, "Type") {
						continue
					}
					b, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || b.Kind != token.STRING {
						continue
					}
					s, _ := strconv.Unquote(b.Value)
					n++
					if !record.Known(s) {
						t.Errorf("%s: %s = %q is not in the catalogue: add it (Register in an init of its events_<domain>.go file)", fset.Position(vs.Pos()), name.Name, s)
					}
				}
				return true
			})
		}
	}
	if n < 20 {
		t.Fatalf("found only %d Type constants: the test no longer reads the package", n)
	}
}

// TestDocsNameEveryNestedField fails when a field of a nested object the
// docs describe (a "### Name" section for a struct of this package) is not
// documented there.
func TestDocsNameEveryNestedField(t *testing.T) {
	doc, err := os.ReadFile("../../docs/record.md")
	if err != nil {
		t.Fatal(err)
	}
	nested := map[string]reflect.Type{
		"SandboxSettings": reflect.TypeOf(record.SandboxSettings{}),
		"RunSettings":     reflect.TypeOf(record.RunSettings{}),
		"TeamSettings":    reflect.TypeOf(record.TeamSettings{}),
		"LimitSettings":   reflect.TypeOf(record.LimitSettings{}),
		"ToolMeta":        reflect.TypeOf(record.ToolMeta{}),
		"MCPCall":         reflect.TypeOf(record.MCPCall{}),
		"MCPTool":         reflect.TypeOf(record.MCPTool{}),
		"ModelSettings":   reflect.TypeOf(record.ModelSettings{}),
		"Span":            reflect.TypeOf(record.Span{}),
	}
	for name, typ := range nested {
		start := strings.Index(string(doc), "### "+name+"\n")
		if start < 0 {
			t.Errorf("docs/record.md has no section \"### %s\"", name)
			continue
		}
		sec := string(doc[start+4:])
		if end := strings.Index(sec, "\n### "); end >= 0 {
			sec = sec[:end]
		}
		for _, f := range jsonFields(typ) {
			if !strings.Contains(sec, "`"+f+"`") {
				t.Errorf("docs/record.md, section %s: field `%s` is not documented", name, f)
			}
		}
	}
}
