package eval

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadSuite: a suite file never panics the loader, and a loaded suite
// is consistent (worlds and configs present, names unique, rollouts ≥ 1).
func FuzzLoadSuite(f *testing.F) {
	f.Add([]byte("name: s\nworlds: [{id: w-0123456789ab}]\nconfigs: [{name: a}]\n"))
	f.Add([]byte("worlds: [{gen: {family: file, seed: 1, level: 2, count: 3}}]\nconfigs: [{name: a, interventions: [{after_turns: 1, text: x, expect: {path: /outputs/a, contains: b}}]}]\n"))
	f.Add([]byte("rollouts: -1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "suite.yaml")
		os.WriteFile(p, data, 0o644)
		s, err := LoadSuite(p)
		if err != nil {
			return
		}
		if len(s.Worlds) == 0 || len(s.Configs) == 0 || s.Rollouts < 1 {
			t.Fatalf("inconsistent suite loaded: %+v", s)
		}
		seen := map[string]bool{}
		for _, c := range s.Configs {
			if c.Name == "" || seen[c.Name] {
				t.Fatalf("config names: %+v", s.Configs)
			}
			seen[c.Name] = true
		}
	})
}
