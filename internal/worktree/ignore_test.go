package worktree

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestIgnoreMatch(t *testing.T) {
	ig := Ignore(append(slices.Clone(DefaultIgnore), "build/out", " "))
	for rel, want := range map[string]bool{
		"__pycache__":                    true,
		"pkg/__pycache__/m.cpython.pyc":  true,
		"m.pyc":                          true,
		"tests/.pytest_cache/v/cache/lf": true,
		"build/out/x.bin":                true,
		"build/other":                    false,
		"src/pycache.py":                 false,
		"m.py":                           false,
	} {
		if got := ig.Match(rel); got != want {
			t.Errorf("Match(%q) = %v, want %v", rel, got, want)
		}
	}
}

// A subagent's test run leaves caches in its worktree; the merge leaves
// them out and says so, and merges the rest.
func TestMergeLeavesIgnoredOut(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			shared, root := setup(t)
			w := open(t, k.create, shared, root, "agent1")
			write(t, filepath.Join(w.Dir, "calc.py"), "x = 1\n")
			write(t, filepath.Join(w.Dir, "__pycache__", "calc.cpython-311.pyc"), "\x00")
			write(t, filepath.Join(w.Dir, ".pytest_cache", "v", "lastfailed"), "{}")
			write(t, filepath.Join(w.Dir, "dir", "old.pyc"), "\x00")
			rep, err := w.Merge()
			if err != nil {
				t.Fatal(err)
			}
			if read(t, filepath.Join(shared, "calc.py")) != "x = 1\n" {
				t.Fatal("calc.py not merged")
			}
			for _, p := range []string{"__pycache__", ".pytest_cache", "dir/old.pyc"} {
				if exists(filepath.Join(shared, p)) {
					t.Errorf("%s was merged", p)
				}
			}
			if len(rep.Ignored) == 0 || !slices.Contains(rep.Ignored, "dir/old.pyc") {
				t.Errorf("ignored %v", rep.Ignored)
			}
			for _, c := range rep.Applied {
				if (Ignore(DefaultIgnore)).Match(c.Path) {
					t.Errorf("applied an ignored change %s", c.Path)
				}
			}
		})
	}
}
