package archtest

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// archDoc is the page that defines every requirement id the code cites.
const archDoc = "docs/architecture.md"

var (
	// reqID is a requirement id: a section (R-PUB) or one requirement
	// (R-PUB-4). The word boundary keeps "VERIFIER-SAYS" out.
	reqID = regexp.MustCompile(`\bR-[A-Z]+(?:-[0-9]+)?\b`)
	// section is a SPEC section, one (§9) or a range (§6–8).
	section = regexp.MustCompile(`§\s*([0-9]+)(?:\s*[–-]\s*([0-9]+))?`)
	// defined is how archDoc defines one requirement: a bold list item.
	defined = regexp.MustCompile(`(?m)^- \*\*(R-[A-Z]+-[0-9]+)\*\* \S`)
	// heading is how archDoc defines a section and its ids.
	heading = regexp.MustCompile(`(?m)^### §([0-9]+) .*$`)
)

// citation is one id or section cited at a place in the module.
type citation struct {
	what, where string
}

// moduleRoot is the directory holding go.mod, above this test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// cited returns what text cites, each at where:line.
func cited(text, where string, line int) []citation {
	var out []citation
	for i, l := range strings.Split(text, "\n") {
		at := where + ":" + strconv.Itoa(line+i)
		for _, id := range reqID.FindAllString(l, -1) {
			out = append(out, citation{id, at})
		}
		for _, m := range section.FindAllStringSubmatch(l, -1) {
			from, _ := strconv.Atoi(m[1])
			to := from
			if m[2] != "" {
				to, _ = strconv.Atoi(m[2])
			}
			for n := from; n <= to && n-from < 20; n++ {
				out = append(out, citation{"§" + strconv.Itoa(n), at})
			}
		}
	}
	return out
}

// goComments returns the citations in the comments of one Go file.
func goComments(t *testing.T, path, rel string) []citation {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file := fset.AddFile(rel, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []citation
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, cited(lit, rel, fset.Position(pos).Line)...)
		}
	}
}

// citations walks the module: Go comments, the pages under docs/ but
// archDoc, and the README.
func citations(t *testing.T, root string) []citation {
	t.Helper()
	var out []citation
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go"):
			out = append(out, goComments(t, path, rel)...)
		case rel == "README.md" || strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md") && rel != archDoc:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out = append(out, cited(string(b), rel, 1)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// definitions reads what archDoc defines: requirement ids, section ids and
// section numbers. A definition made twice is an error.
func definitions(t *testing.T, doc string) map[string]bool {
	t.Helper()
	defs := map[string]bool{}
	add := func(what string) {
		if defs[what] {
			t.Errorf("%s defines %s twice", archDoc, what)
		}
		defs[what] = true
	}
	for _, m := range defined.FindAllStringSubmatch(doc, -1) {
		add(m[1])
	}
	for _, m := range heading.FindAllStringSubmatch(doc, -1) {
		add("§" + m[1])
		for _, id := range reqID.FindAllString(m[0], -1) {
			add(id)
		}
	}
	return defs
}

// TestCitationsResolve: every requirement id and SPEC section the module
// cites is defined in docs/architecture.md, so no citation points out of
// the repository.
func TestCitationsResolve(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, archDoc))
	if err != nil {
		t.Fatal(err)
	}
	defs := definitions(t, string(doc))
	if len(defs) == 0 {
		t.Fatalf("%s defines no requirement", archDoc)
	}
	cs := citations(t, root)
	if len(cs) < 50 {
		t.Fatalf("found %d citations in the module; the walk is broken", len(cs))
	}
	missing := map[string][]string{}
	for _, c := range cs {
		if !defs[c.what] {
			missing[c.what] = append(missing[c.what], c.where)
		}
	}
	for _, what := range slices.Sorted(maps.Keys(missing)) {
		t.Errorf("%s cites %s, which %s does not define: add it under Requirements with one sentence, or fix the citation",
			strings.Join(missing[what], ", "), what, archDoc)
	}
}

// TestCited checks the citation scanner on the forms comments use.
func TestCited(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"// Package board (SPEC §6, R-BOARD): R-BOARD-5.", []string{"R-BOARD", "R-BOARD-5", "§6"}},
		{"// SPEC §6–8", []string{"§6", "§7", "§8"}},
		{"// R-CONTRACT-3/4, R-DATA-1..4", []string{"R-CONTRACT-3", "R-DATA-1"}},
		{`"VERIFIER-SAYS" and HDR-X are no ids`, nil},
	} {
		var got []string
		for _, c := range cited(tc.text, "f", 1) {
			got = append(got, c.what)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("cited(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
