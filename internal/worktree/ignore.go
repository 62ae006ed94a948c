package worktree

import (
	"path"
	"strings"
)

// DefaultIgnore are by-products of running code and tests that are never
// merged into the shared workspace: a subagent's test run must not leave
// its caches in everyone's /workspace.
var DefaultIgnore = []string{"__pycache__", "*.pyc", ".pytest_cache"}

// Ignore is a list of path.Match patterns of changes Merge leaves out. A
// pattern without "/" matches any element of a path (so "__pycache__" also
// leaves out everything beneath such a directory); one with "/" matches the
// whole slash-separated relative path or a parent of it.
type Ignore []string

// Match reports whether rel (slash-separated, relative) is ignored.
func (ig Ignore) Match(rel string) bool {
	for _, p := range ig {
		p = strings.Trim(strings.TrimSpace(p), "/")
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			for _, el := range strings.Split(rel, "/") {
				if ok, _ := path.Match(p, el); ok {
					return true
				}
			}
			continue
		}
		for r := rel; r != "."; r = path.Dir(r) {
			if ok, _ := path.Match(p, r); ok {
				return true
			}
		}
	}
	return false
}

// filter splits changes into those to merge and the paths ignored.
func (ig Ignore) filter(changes []Change) (kept []Change, ignored []string) {
	if len(ig) == 0 {
		return changes, nil
	}
	for _, c := range changes {
		if ig.Match(c.Path) {
			ignored = append(ignored, c.Path)
		} else {
			kept = append(kept, c)
		}
	}
	return kept, ignored
}
