package gen_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// runner is the sandbox the verifier runs in (bwrap, else native).
func runner(t *testing.T) sandbox.Runner {
	t.Helper()
	r, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Skipf("no sandbox to run the world's verifier in: %v", err)
	}
	return r
}

func build(t *testing.T, st *world.Store, s gen.Spec) (*world.World, map[string]float64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), s.Name())
	diff, err := gen.Generate(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := st.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return w, diff
}

func TestGenerateDeterministicAndChecked(t *testing.T) {
	st := world.NewStore(t.TempDir())
	r := runner(t)
	for _, fam := range gen.Families {
		t.Run(fam, func(t *testing.T) {
			var prev map[string]float64
			for level := 1; level <= 5; level++ {
				a, diff := build(t, st, gen.Spec{Family: fam, Seed: 7, Level: level})
				b, _ := build(t, st, gen.Spec{Family: fam, Seed: 7, Level: level})
				c, _ := build(t, st, gen.Spec{Family: fam, Seed: 8, Level: level})
				if a.ID != b.ID {
					t.Errorf("level %d: seed 7 twice gave %s and %s", level, a.ID, b.ID)
				}
				if a.ID == c.ID {
					t.Errorf("level %d: seeds 7 and 8 gave the same id %s", level, a.ID)
				}
				if prev != nil {
					key := "acquisition_pressure"
					if fam == "code" {
						key = "failure_distance"
					}
					if diff[key] <= prev[key] {
						t.Errorf("level %d: %s %v not above level %d's %v", level, key, diff[key], level-1, prev[key])
					}
					if fam == "code" && (diff["dependency_depth"] <= prev["dependency_depth"] || diff["test_observability"] >= prev["test_observability"]) {
						t.Errorf("level %d: code coordinates do not rise: %v after %v", level, diff, prev)
					}
				}
				prev = diff
				if rep := world.Check(context.Background(), a, r); !rep.OK {
					t.Errorf("level %d: worlds check %s: %v\nsolution %+v\nempty %+v", level, a.ID, rep.Problems, rep.Solution.Failures, rep.Empty.Failures)
				}
			}
		})
	}
}

func TestGenerateRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := gen.Generate(gen.Spec{Family: "file", Seed: 1, Level: 1}, dir); err == nil {
		t.Fatal("generated into a non-empty directory")
	}
	if _, err := gen.Generate(gen.Spec{Family: "file", Seed: 1, Level: 6}, t.TempDir()); err == nil {
		t.Fatal("level 6 accepted")
	}
}
