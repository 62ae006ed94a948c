package run

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/apodex/apodex/internal/contract"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/verify"
)

// Reverification is `apodex verify RUN`: the contract's checks and clauses
// run again on a finished run's inputs, workspace and outputs.
type Reverification struct {
	RunID  string             `json:"run_id"`
	Passed bool               `json:"passed"`
	Checks []contract.Finding `json:"checks,omitempty"`
	Verify []verify.Result    `json:"verification,omitempty"`
	// Warning says when the task file changed since the run (its hash
	// differs): the verdict is then about today's tests.
	Warning string `json:"warning,omitempty"`
}

// Reverify reruns the task verifier of the run in dir. It reloads the task
// file the run recorded; a run without a task file has nothing to verify.
func Reverify(ctx context.Context, dir string) (Reverification, error) {
	rv := Reverification{RunID: filepath.Base(dir)}
	c, err := record.Read(dir)
	if err != nil {
		return rv, err
	}
	var ce struct {
		U0   string `json:"u0"`
		File string `json:"file"`
		Hash string `json:"hash"`
	}
	for _, e := range c.Events {
		if e.Type == record.TypeContract {
			if err := e.Decode(&ce); err != nil {
				return rv, err
			}
		}
	}
	if ce.File == "" {
		return rv, fmt.Errorf("run %s has no task file: only runs started with --task have a verifier", rv.RunID)
	}
	task, err := contract.Load(ce.File)
	if err != nil {
		return rv, fmt.Errorf("reload the task file the run used: %w", err)
	}
	if ce.U0 != "" {
		task.SetObjective(ce.U0)
	}
	if h := task.Hash(); h != ce.Hash {
		rv.Warning = fmt.Sprintf("the task file %s changed since the run (hash %s, recorded %s): verifying against its current clauses", ce.File, h, ce.Hash)
	}
	env := verify.Env{Inputs: filepath.Join(dir, "inputs"), Workspace: filepath.Join(dir, "workspace"), Outputs: filepath.Join(dir, "outputs"), Trace: dir}
	rv.Checks = task.CheckDeliverables(env.Outputs, env.Inputs)
	rv.Passed = true
	for _, f := range rv.Checks {
		rv.Passed = rv.Passed && f.OK
	}
	if len(task.Verify) > 0 {
		runner, err := sandbox.New(sandbox.KindAuto)
		if err != nil {
			return rv, err
		}
		env.Runner = runner
		rv.Verify = verify.RunAll(ctx, env, task.Verify)
		for _, r := range rv.Verify {
			rv.Passed = rv.Passed && r.Passed
		}
	}
	return rv, nil
}
