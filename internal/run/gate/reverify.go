package gate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/run/evidenceplane"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/taskstore"
	"github.com/apodex/apodex/internal/verify"
	"github.com/apodex/apodex/internal/world"
)

// Reverification is `apodex verify RUN`: the contract's checks and clauses
// run again on a finished run's inputs, workspace and outputs.
type Reverification struct {
	RunID  string          `json:"run_id"`
	Passed bool            `json:"passed"`
	Checks []check.Finding `json:"checks,omitempty"`
	Verify []verify.Result `json:"verification,omitempty"`
	// Warning says when the task file changed since the run (its hash
	// differs): the verdict is then about today's tests.
	Warning string `json:"warning,omitempty"`
}

// Reverify reruns the task verifier of the run in dir against the contract
// in force at its end (revisions included), rebuilt from the run directory
// alone: the task file itself is not read. A run without a task file has
// nothing to verify.
func Reverify(ctx context.Context, dir string) (Reverification, error) {
	rv := Reverification{RunID: filepath.Base(dir)}
	st, err := runstate.Load(dir)
	if err != nil {
		return rv, err
	}
	if len(st.Contracts) == 0 || st.Contracts[0].File == "" {
		return rv, fmt.Errorf("run %s has no task file: only runs started with --task have a verifier", rv.RunID)
	}
	task, err := taskstore.Rebuild(dir, st.State)
	if err != nil {
		return rv, err
	}
	if ce := st.Contract(); task.Hash() != ce.Hash {
		rv.Warning = fmt.Sprintf("the task file %s changed since the run (hash %s, recorded %s): verifying against its current clauses", ce.File, task.Hash(), ce.Hash)
	}
	env := verify.Env{Inputs: filepath.Join(dir, "inputs"), Workspace: filepath.Join(dir, "workspace"), Outputs: filepath.Join(dir, "outputs"), Trace: dir}
	recorded := ""
	if st.Started != nil && st.Started.Settings != nil && st.Started.Settings.World != nil {
		recorded = st.Started.Settings.World.ID
	}
	ws, warning, done, err := terminalWorkspace(dir, recorded)
	if err != nil {
		return rv, err
	}
	defer done()
	env.Workspace = ws
	if warning != "" {
		rv.Warning = strings.TrimPrefix(rv.Warning+"; "+warning, "; ")
	}
	rv.Checks = check.Deliverables(task, env.Outputs, env.Inputs)
	rv.Passed = true
	for _, f := range rv.Checks {
		rv.Passed = rv.Passed && f.OK
	}
	if len(task.Verify) > 0 {
		kind := ""
		if st.Started != nil {
			kind = st.Started.Sandbox.Kind
		}
		runner, err := Sandbox(kind)
		if err != nil && verify.NeedsSandbox(task.Verify) {
			return rv, err
		}
		env.Runner, env.Evidence = runner, evidenceplane.RecordedQ(dir)
		rv.Verify = verify.RunAll(ctx, env, task.Verify)
		for _, r := range rv.Verify {
			rv.Passed = rv.Passed && r.Passed
		}
	}
	return rv, nil
}

// terminalWorkspace is a directory holding the run's terminal /workspace
// for the verifier: workspace/ itself, or for a world rollout that kept
// only its changes (runfiles.Base) the tree materialized beside it — the
// run's files over its stored world's, linked — which done removes. The
// base must name the world the record does (recorded). The warning says
// when the stored world is no longer the one the run had.
func terminalWorkspace(dir, recorded string) (ws, warning string, done func(), err error) {
	ws, done = filepath.Join(dir, "workspace"), func() {}
	b, err := runfiles.ReadBaseOf(dir, recorded)
	if err != nil {
		return "", "", done, fmt.Errorf("run %s: %w", filepath.Base(dir), err)
	}
	if b == nil {
		return ws, "", done, nil
	}
	if w, err := world.NewStore(filepath.Dir(filepath.Dir(dir))).Get(b.World); err != nil {
		return "", "", done, fmt.Errorf("run %s kept only what it changed of world %s's workspace, and the world cannot be read: %w", filepath.Base(dir), b.World, err)
	} else if err := w.Intact(); err != nil {
		warning = fmt.Sprintf("world %s changed since it was stored (%v): verifying the run's changes over the world as it is now", b.World, err)
	}
	tmp, err := os.MkdirTemp(dir, ".verify-workspace-")
	if err != nil {
		return "", "", done, err
	}
	done = func() { os.RemoveAll(tmp) }
	ws = filepath.Join(tmp, "workspace")
	if _, err := runfiles.Materialize(dir, ws, false); err != nil {
		done()
		return "", "", func() {}, err
	}
	return ws, warning, done, nil
}
