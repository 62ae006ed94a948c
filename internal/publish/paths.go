package publish

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// validate checks the syntax of a claim's paths, naming every problem.
func validate(paths []string, maxPaths int) error {
	if len(paths) == 0 {
		return refuse(ErrInvalidClaim, `claim_outputs refused: paths is empty; list the exact files you will deliver, e.g. ["/outputs/report.md"]`)
	}
	if len(paths) > maxPaths {
		return refuse(ErrInvalidClaim, "claim_outputs refused: %d paths, more than the manifest cap of %d; nothing was claimed. %s", len(paths), maxPaths, capHint)
	}
	var problems []string
	seen := map[string]bool{}
	add := func(msg string) {
		if !slices.Contains(problems, msg) {
			problems = append(problems, msg)
		}
	}
	for _, pp := range paths {
		if msg := checkPath(pp); msg != "" {
			add(msg)
			continue
		}
		if seen[pp] {
			add(fmt.Sprintf("%s is listed twice", pp))
		}
		seen[pp] = true
	}
	for _, a := range paths {
		for _, b := range paths {
			if seen[a] && seen[b] && inside(a, b) {
				add(fmt.Sprintf("%s is inside %s, also listed; a declared path is one file", a, b))
			}
		}
	}
	if len(problems) > 0 {
		return refuse(ErrInvalidClaim, "claim_outputs refused: %s; nothing was claimed", strings.Join(problems, "; "))
	}
	return nil
}

// checkPath explains what is wrong with one declared path ("" if nothing).
func checkPath(pp string) string {
	clean := filepath.ToSlash(filepath.Clean("/" + pp))
	switch {
	case strings.TrimSpace(pp) == "":
		return "an empty path"
	case strings.ContainsRune(pp, 0):
		return fmt.Sprintf("%q contains a NUL byte", pp)
	case len(pp) > 1024:
		return fmt.Sprintf("%.40q... is longer than 1024 bytes", pp)
	case slices.Contains(strings.Split(pp, "/"), ".."):
		return fmt.Sprintf("%q contains \"..\"; give the exact path under /outputs", pp)
	case !strings.HasPrefix(pp, "/"):
		return fmt.Sprintf("%q is relative; give the full path, e.g. /outputs/%s", pp, strings.TrimPrefix(clean, "/"))
	case clean != pp:
		return fmt.Sprintf("%q is not written plainly; give it as %s", pp, clean)
	case pp == "/outputs":
		return "/outputs is the directory itself; list the files in it you will deliver"
	case !strings.HasPrefix(pp, "/outputs/"):
		return fmt.Sprintf("%s is not under /outputs", pp)
	case pp == "/outputs/scratch" || strings.HasPrefix(pp, "/outputs/scratch/"):
		return fmt.Sprintf("%s is in /outputs/scratch/, which anyone may write without a claim and which is never delivered; declare the final path of the deliverable instead", pp)
	}
	for _, c := range strings.Split(pp, "/") {
		if len(c) > 255 {
			return fmt.Sprintf("%.40q... has a name longer than 255 bytes", pp)
		}
	}
	return ""
}

// inside reports whether plane path a is strictly inside b.
func inside(a, b string) bool { return strings.HasPrefix(a, b+"/") }

// rel is a plane path relative to /outputs.
func rel(pp string) string { return strings.TrimPrefix(pp, "/outputs/") }

func pick(m map[string]string, keys []string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// list prints at most n paths.
func list(paths []string, n int) string {
	if len(paths) <= n {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:n], ", "), len(paths)-n)
}
