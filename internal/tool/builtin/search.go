package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

const (
	maxListEntries = 1000
	maxGrepHits    = 500
	maxGrepLine    = 64 << 10 // bytes of a line searched
	maxHitText     = 300      // bytes of a matching line shown
)

// unlisted are directories list_files and grep do not descend into unless
// asked for by path: they are large and rarely what the agent is after.
var unlisted = map[string]bool{".git": true, "node_modules": true, "__pycache__": true, ".venv": true}

type listFilesArgs struct {
	Path    string `json:"path" desc:"The directory to list, e.g. /inputs or /workspace/src; a relative path is taken from /workspace; \"/\" shows the three planes."`
	Pattern string `json:"pattern,omitempty" desc:"Glob such as *.csv, src/*.go or **/test_*.py, matched against each entry's name and against its path relative to the directory."`
}

func listFilesTool(env Env) tool.Tool {
	return tool.Define("list_files",
		"List the entries under a directory, recursively: directories end with \"/\", files show their size, links show their target. .git, node_modules, __pycache__ and .venv are not entered unless you list them by path. Stops at 1000 entries. Paths "+pathDesc,
		env.ObservationLimit,
		func(ctx context.Context, a listFilesArgs) tool.Result { return listFiles(ctx, env, a) })
}

func listFiles(ctx context.Context, env Env, a listFilesArgs) tool.Result {
	if a.Pattern != "" {
		if _, err := path.Match(a.Pattern, ""); err != nil {
			return tool.Errorf("bad glob pattern %q: use *, ?, [abc] and ** (any number of directories)", a.Pattern)
		}
	}
	if t := strings.TrimSpace(a.Path); strings.HasPrefix(t, "/") && path.Clean(t) == "/" {
		outputs := "deliverables (read-only in this run)"
		if env.publishing() {
			outputs = "deliverables (declare paths with claim_outputs before writing; /outputs/scratch/ is shared intermediate space)"
		}
		return tool.Result{Output: "/inputs/     the task's input files (read-only)\n/workspace/  your working area (writable; relative paths start here)\n/outputs/    " + outputs}
	}
	p, err := env.FS.Resolve(a.Path)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	root, err := env.FS.OpenRoot(p.Plane)
	if err != nil {
		return fileError(p, err)
	}
	defer root.Close()
	base := relName(p.Rel)
	fi, err := root.Lstat(base)
	switch {
	case err != nil:
		return fileError(p, err)
	case !fi.IsDir():
		return tool.Result{Output: fmt.Sprintf("%s is a file (%s); use read_file to read it", p.PlanePath, humanSize(fi.Size()))}
	}
	var lines []string
	more := false
	err = fs.WalkDir(root.FS(), base, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == base {
				return err
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if name == base {
			return nil
		}
		rel := strings.TrimPrefix(name, base+"/")
		if base == "." {
			rel = name
		}
		if d.IsDir() && unlisted[d.Name()] {
			if a.Pattern == "" || matchGlob(a.Pattern, rel) {
				lines = append(lines, rel+"/  (not entered; list it by path to see inside)")
			}
			return fs.SkipDir
		}
		if a.Pattern != "" && !matchGlob(a.Pattern, rel) {
			return nil
		}
		if len(lines) == maxListEntries {
			more = true
			return fs.SkipAll
		}
		lines = append(lines, entryLine(root.Readlink, name, rel, d))
		return nil
	})
	if err != nil {
		return fileError(p, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s/\n", p.PlanePath)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	switch {
	case len(lines) == 0 && a.Pattern != "":
		fmt.Fprintf(&b, "[no entries match %q]", a.Pattern)
	case len(lines) == 0:
		b.WriteString("[empty directory]")
	case more:
		fmt.Fprintf(&b, "[stopped at %d entries; list a subdirectory or give a pattern to see the rest]", maxListEntries)
	default:
		fmt.Fprintf(&b, "[%s]", plural(len(lines), "entry", "entries"))
	}
	return tool.Result{Output: b.String()}
}

func entryLine(readlink func(string) (string, error), name, rel string, d fs.DirEntry) string {
	switch t := d.Type(); {
	case t.IsDir():
		return rel + "/"
	case t&fs.ModeSymlink != 0:
		target, _ := readlink(name)
		return rel + " -> " + target
	case t.IsRegular():
		if fi, err := d.Info(); err == nil {
			return rel + "  " + humanSize(fi.Size())
		}
		return rel
	default:
		return rel + "  (" + t.String() + ")"
	}
}

// matchGlob matches a glob against the base name or the whole relative path;
// "**" matches any number of path segments.
func matchGlob(pattern, rel string) bool {
	if ok, _ := path.Match(pattern, path.Base(rel)); ok {
		return true
	}
	ps, ns := strings.Split(pattern, "/"), strings.Split(rel, "/")
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var ok bool
		switch {
		case i == len(ps):
			ok = j == len(ns)
		case ps[i] == "**":
			ok = match(i+1, j) || (j < len(ns) && match(i, j+1))
		case j < len(ns):
			m, _ := path.Match(ps[i], ns[j])
			ok = m && match(i+1, j+1)
		}
		memo[key] = ok
		return ok
	}
	return match(0, 0)
}

type grepArgs struct {
	Pattern string `json:"pattern" desc:"Regular expression in Go RE2 syntax, matched against each line, e.g. def \\w+\\( or (?i)total."`
	Path    string `json:"path,omitempty" desc:"File or directory to search (default: all of /inputs, /workspace and /outputs)."`
}

func grepTool(env Env) tool.Tool {
	return tool.Define("grep",
		"Search file contents for a regular expression (Go RE2 syntax) and print each matching line as path:line: text. Searches one file or a directory tree (by default /inputs, /workspace and /outputs); binary files, .git and node_modules are skipped. Stops at 500 matches.",
		env.ObservationLimit,
		func(ctx context.Context, a grepArgs) tool.Result {
			return grep(ctx, env, a)
		})
}

func grep(ctx context.Context, env Env, a grepArgs) tool.Result {
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return tool.Errorf("bad regular expression %q: %v (Go RE2 syntax; escape ( [ . * with a backslash to match them literally)", a.Pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	var targets []workspace.Path
	where := "/inputs, /workspace and /outputs"
	if a.Path != "" {
		p, err := env.FS.Resolve(a.Path)
		if err != nil {
			return tool.Errorf("%v", err)
		}
		targets, where = []workspace.Path{p}, p.PlanePath
	} else {
		for _, r := range workspace.Roots() {
			p, err := env.FS.Resolve(r)
			if err != nil {
				return tool.Errorf("%v", err)
			}
			targets = append(targets, p)
		}
	}
	g := grepper{env: env, re: re}
	for _, t := range targets {
		if err := g.search(ctx, t, a.Path != ""); err != nil {
			return fileError(t, err)
		}
		if g.full || ctx.Err() != nil {
			break
		}
	}
	// Each run of adjacent matching lines is one evidence item, its id
	// shown on its lines: cite [E7] for what those lines say.
	note, registered := registerRuns(ctx, env, g.runs, g.hits)
	var b strings.Builder
	for _, h := range g.hits {
		b.WriteString(h)
		b.WriteByte('\n')
	}
	switch {
	case len(g.hits) == 0:
		fmt.Fprintf(&b, "[no matches for %q in %s", a.Pattern, where)
	case g.full:
		fmt.Fprintf(&b, "[stopped at %d matches; narrow the pattern or the path", maxGrepHits)
	default:
		fmt.Fprintf(&b, "[%s in %s", plural(len(g.hits), "match", "matches"), plural(g.files, "file", "files"))
	}
	if g.binary > 0 {
		fmt.Fprintf(&b, "; %s skipped", plural(g.binary, "binary file", "binary files"))
	}
	if ctx.Err() != nil {
		b.WriteString("; interrupted")
	}
	if registered > 0 {
		fmt.Fprintf(&b, "; evidence ids on the lines: each names exactly its adjacent matching lines")
	}
	b.WriteString("]")
	if note != "" {
		b.WriteString("\n" + note)
	}
	return tool.Result{Output: b.String()}
}

type grepper struct {
	env           Env
	re            *regexp.Regexp
	hits          []string
	files, binary int
	full          bool
	runs          []matchRun // the matching lines, run by run, as evidence
}

// search walks one target; a missing target is an error only if named.
func (g *grepper) search(ctx context.Context, t workspace.Path, named bool) error {
	root, err := g.env.FS.OpenRoot(t.Plane)
	if err != nil {
		return err
	}
	defer root.Close()
	base := relName(t.Rel)
	err = fs.WalkDir(root.FS(), base, func(name string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && name == base:
			return err
		case err != nil:
			return nil
		case ctx.Err() != nil:
			return fs.SkipAll
		case d.IsDir() && name != base && unlisted[d.Name()]:
			return fs.SkipDir
		case !d.Type().IsRegular():
			return nil
		}
		g.file(workspace.Path{Plane: t.Plane, Rel: name})
		if g.full {
			return fs.SkipAll
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) && !named {
		return nil
	}
	return err
}

// file searches one regular file; unreadable files are skipped.
func (g *grepper) file(p workspace.Path) {
	f, err := g.env.FS.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); isBinary(head) {
		g.binary++
		return
	}
	planePath := "/" + p.Plane + "/" + p.Rel
	matched := false
	for n := 1; ; n++ {
		line, _, err := readLine(br, maxGrepLine)
		if err != nil {
			break
		}
		loc := g.re.FindIndex(line)
		if loc == nil {
			continue
		}
		if !matched {
			matched = true
			g.files++
		}
		g.hits = append(g.hits, fmt.Sprintf("%s:%d: %s", planePath, n, hitText(line, loc)))
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if k := len(g.runs) - 1; k >= 0 && g.runs[k].path == planePath && g.runs[k].to == n-1 {
			r := &g.runs[k]
			r.to, r.lines, r.hits = n, append(r.lines, text), append(r.hits, len(g.hits)-1)
		} else {
			g.runs = append(g.runs, matchRun{path: planePath, from: n, to: n, lines: []string{text}, hits: []int{len(g.hits) - 1}})
		}
		if len(g.hits) == maxGrepHits {
			g.full = true
			return
		}
	}
}

// hitText shows a matching line, or a window around the match of a long one.
func hitText(line []byte, loc []int) string {
	start, end := 0, len(line)
	if end > maxHitText {
		start = max(0, loc[0]-maxHitText/3)
		end = min(len(line), start+maxHitText)
		for start > 0 && !utf8.RuneStart(line[start]) {
			start++
		}
		for end < len(line) && !utf8.RuneStart(line[end]) {
			end--
		}
	}
	s := strings.ToValidUTF8(string(line[start:end]), "\uFFFD")
	if start > 0 {
		s = "…" + s
	}
	if end < len(line) {
		s += "…"
	}
	return s
}
