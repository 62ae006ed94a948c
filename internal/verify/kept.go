package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/workspace"
)

// Costly are the contract's clauses the cheap checks leave to the
// final gate: tests and recompute (a sandbox each) and rubric (a judge).
// Human clauses await review whatever the agent does and are left out.
func Costly(c *contract.Contract) []contract.Clause {
	var out []contract.Clause
	for _, cl := range c.Verify {
		if cl.Kind != contract.KindSourceAlignment && cl.Kind != contract.KindHuman {
			out = append(out, cl)
		}
	}
	return out
}

// Kept is what clauses said on planes (the Sum of PlanesSum), kept so
// that a later run of the same clauses on unchanged planes can take them.
type Kept struct {
	Sum     string
	Clauses []contract.Clause
	Results []Result
}

// Result is the kept result of clause cl when the planes' digest is
// still sum.
func (f *Kept) Result(cl contract.Clause, sum string) (Result, bool) {
	if f == nil || f.Sum != sum || sum == "" {
		return Result{}, false
	}
	for i, k := range f.Clauses {
		if reflect.DeepEqual(k, cl) {
			return f.Results[i], true
		}
	}
	return Result{}, false
}

// RunKept runs the clauses one after another, taking a clause's result
// from prior when it ran on planes (env's Outputs and Workspace) with the
// same digest.
func RunKept(ctx context.Context, env Env, clauses []contract.Clause, prior *Kept) []Result {
	if prior == nil {
		return RunAll(ctx, env, clauses)
	}
	sum := PlanesSum(env.Outputs, env.Workspace)
	out := make([]Result, 0, len(clauses))
	for _, cl := range clauses {
		if r, ok := prior.Result(cl, sum); ok {
			out = append(out, r)
			continue
		}
		out = append(out, Run(ctx, env, cl))
	}
	return out
}

// PlanesSum is a digest of the directories' files: each regular file's
// path and content, each symbolic link's target; "" when one cannot be
// read (so nothing is reused).
func PlanesSum(dirs ...string) string {
	h := sha256.New()
	for _, dir := range dirs {
		fmt.Fprintf(h, "dir %s\n", dir)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			switch {
			case d.Type().IsRegular():
				sum, _, err := workspace.HashFile(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "f %q %s\n", rel, sum)
			case d.Type()&fs.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				fmt.Fprintf(h, "l %q %q\n", rel, target)
			case d.IsDir():
				fmt.Fprintf(h, "d %q\n", rel)
			}
			return nil
		})
		if err != nil {
			return ""
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
