package verify

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/contract"
)

// The digest changes with a file's content, a new file and a link's
// target, and a kept result is taken only on planes with the same digest.
func TestKeptOnlyOnUnchangedPlanes(t *testing.T) {
	out, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(out, "r.md"), []byte("a"), 0o644)
	sum := PlanesSum(out, ws)
	if sum == "" || PlanesSum(out, ws) != sum {
		t.Fatal("the digest of unchanged planes differs")
	}
	for _, change := range []func(){
		func() { os.WriteFile(filepath.Join(out, "r.md"), []byte("b"), 0o644) },
		func() { os.WriteFile(filepath.Join(ws, "new"), nil, 0o644) },
		func() { os.Symlink("r.md", filepath.Join(out, "l")) },
		func() { os.Remove(filepath.Join(out, "l")); os.Symlink("x", filepath.Join(out, "l")) },
	} {
		change()
		next := PlanesSum(out, ws)
		if next == sum {
			t.Fatal("a change left the digest as it was")
		}
		sum = next
	}
	cl := contract.Clause{Index: 0, Kind: "nope"} // a kind this verifier does not know: Run says so
	prior := &Kept{Sum: sum, Clauses: []contract.Clause{cl}, Results: []Result{{Kind: "nope", Passed: true, Detail: "kept"}}}
	env := Env{Outputs: out, Workspace: ws}
	if r := RunKept(context.Background(), env, []contract.Clause{cl}, prior); !r[0].Passed || r[0].Detail != "kept" {
		t.Errorf("on unchanged planes the kept result was not taken: %+v", r[0])
	}
	os.WriteFile(filepath.Join(out, "r.md"), []byte("c"), 0o644)
	if r := RunKept(context.Background(), env, []contract.Clause{cl}, prior); r[0].Passed || r[0].Detail == "kept" {
		t.Errorf("on changed planes the kept result was taken: %+v", r[0])
	}
}
