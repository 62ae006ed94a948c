package gate

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/apodex/apodex/internal/contract/check"
	"github.com/apodex/apodex/internal/run/evidenceplane"
	"github.com/apodex/apodex/internal/runstate"
	"github.com/apodex/apodex/internal/taskstore"
	"github.com/apodex/apodex/internal/verify"
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
