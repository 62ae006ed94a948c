package world

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Render writes w as `apodex worlds show` prints it: identity, generator,
// difficulty, objective and the stored files.
func Render(out io.Writer, w *World) {
	fmt.Fprintf(out, "world %s  %s (%s)\n", w.ID, w.Name, w.Family)
	if w.Gen.Name != "" {
		fmt.Fprintf(out, "generator: %s v%s seed %d level %d\n", w.Gen.Name, w.Gen.Version, w.Gen.Seed, w.Gen.Level)
	}
	fmt.Fprintf(out, "difficulty: %s\n", Coords(w.Diff))
	fmt.Fprintf(out, "objective: %s\n", strings.Join(strings.Fields(w.Manifest.Contract.Objective), " "))
	fmt.Fprintf(out, "stored in %s (read-only), %d files, %d bytes:\n", w.Dir, len(w.Files), w.Bytes)
	for _, f := range w.Files {
		fmt.Fprintf(out, "  %s  %d bytes  %s\n", f.Path, f.Bytes, f.SHA256.String()[:12])
	}
}

// RenderCheck writes rep, the check of w, as `apodex worlds check` prints it.
func RenderCheck(out io.Writer, w *World, rep CheckReport) {
	mark := "usable"
	if !rep.OK {
		mark = "NOT usable"
	}
	fmt.Fprintf(out, "world %s: %s\n", w.ID, mark)
	fmt.Fprintf(out, "  reference solution: %s\n", passFail(rep.Solution.Passed, rep.Solution.Failures))
	fmt.Fprintf(out, "  empty delivery:     %s\n", passFail(rep.Empty.Passed, rep.Empty.Failures))
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "  PROBLEM: %s\n", strings.Join(strings.Fields(p), " "))
	}
}

func passFail(ok bool, failures []string) string {
	if ok {
		return "passes the verifier"
	}
	if len(failures) > 0 {
		return "fails (" + strings.Join(strings.Fields(failures[0]), " ") + ")"
	}
	return "fails"
}

// Coords renders difficulty coordinates as sorted "name=value" pairs.
func Coords(d map[string]float64) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%g", k, d[k]))
	}
	return strings.Join(parts, " ")
}
