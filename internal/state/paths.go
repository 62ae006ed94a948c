package state

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// planePath cleans p as the tools do (relative to /workspace) and reports
// whether it is under one of the planes.
func planePath(p string) (string, bool) {
	if strings.TrimSpace(p) == "" {
		return "", false
	}
	if !strings.HasPrefix(p, "/") {
		p = "/workspace/" + p
	}
	p = path.Clean(p)
	for _, root := range []string{"/inputs", "/workspace", "/outputs"} {
		if under(p, root) {
			return p, true
		}
	}
	return "", false
}

// separators end a word of a shell command for our purposes.
const separators = " \t\r\n'\"`;|&()<>=:"

// commandPaths lists, in order of first mention, the known files a shell
// command names: plane paths, globs over them, and relative paths that are
// files under /workspace. The target of a truncating ">" is left out (its
// old content is not read); ">>" appends, so its target stays in.
func commandPaths(cmd string, files map[string]FileState) []string {
	var out []string
	add := func(p string) {
		if _, ok := files[p]; ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	truncated := false // the next word follows a single ">"
	for i := 0; i < len(cmd); {
		if cmd[i] == '>' {
			if i+1 < len(cmd) && cmd[i+1] == '>' {
				i += 2
				continue
			}
			truncated = true
			i++
			continue
		}
		if strings.IndexByte(separators, cmd[i]) >= 0 {
			i++
			continue
		}
		j := i
		for j < len(cmd) && strings.IndexByte(separators, cmd[j]) < 0 {
			j++
		}
		word := cmd[i:j]
		i = j
		if truncated {
			truncated = false
			continue
		}
		if strings.HasPrefix(word, "-") || strings.Contains(word, "$") {
			continue
		}
		p, ok := planePath(word)
		if !ok {
			continue
		}
		if !strings.ContainsAny(p, "*?[") {
			add(p)
			continue
		}
		var hits []string
		for f := range files {
			if m, _ := path.Match(p, f); m {
				hits = append(hits, f)
			}
		}
		slices.Sort(hits)
		for _, h := range hits {
			add(h)
		}
	}
	return out
}

// grepHit is one line of grep's output: "/plane/path:line: text".
var grepHit = regexp.MustCompile(`(?m)^(/(?:inputs|workspace|outputs)/.+?):\d+: `)

// grepFiles lists the files grep's output shows matches in, in order.
func grepFiles(out string) []string {
	var files []string
	for _, m := range grepHit.FindAllStringSubmatch(out, -1) {
		if !slices.Contains(files, m[1]) {
			files = append(files, m[1])
		}
	}
	return files
}
