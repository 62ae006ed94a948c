package run

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/workspace"
	"github.com/apodex/apodex/internal/worktree"
	"github.com/apodex/apodex/internal/world"
)

// stageWorld gives a world rollout its fresh state (world.Stage): inputs
// linked from the store instead of copied, and /workspace an overlay of the
// stored workspace. The caller must Finish the rollout.
func stageWorld(w *world.World, dir string, fs *workspace.FS) (*world.Rollout, error) {
	wm := worktree.NewManager(fs.Watch)
	if uid := sandbox.CommandUID(); uid != os.Geteuid() {
		wm.OwnViews(uid, sandbox.SandboxGID) // no chown of every file before the first command
	}
	r, err := world.Stage(w, dir, wm)
	if err != nil {
		return nil, &ConfigError{fmt.Sprintf("cannot stage world %s: %v; check it with `apodex worlds check %s`", w.ID, err, w.ID)}
	}
	fs.Workspace, fs.Upper = r.Workspace, r.Upper
	return r, nil
}

// recordedWorld is the world a run's run_started names, if any.
var recordedWorld = runview.RecordedWorld

// homeOf is the apodex home of the run in dir (<home>/runs/<id>).
func homeOf(dir string) string { return filepath.Dir(filepath.Dir(dir)) }

// ReplayWorld is the stored world a replay of the run in dir starts from.
func ReplayWorld(dir string, rs record.RunStarted) *world.World {
	rw, ok := recordedWorld(rs)
	if !ok {
		return nil
	}
	w, err := world.NewStore(homeOf(dir)).Get(rw.ID)
	if err != nil {
		return nil
	}
	return w
}

// worldRefused waits for the stored world's Intact (Stage began it while
// the first commands ran) and, when it fails, records why and returns it
// as a failure of the final gate: a rollout of a world changed in the
// store is never completed, verified or trainable. nil: no world, or an
// intact one.
func worldRefused(r *world.Rollout, log *record.Log) []string {
	if r == nil {
		return nil
	}
	err := r.Intact()
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("the stored world %s is not the one stored, so this rollout's result does not count: %v", r.World.ID, err)
	appendEvent(log, record.TypeWarning, "", record.Warning{Code: "world_changed", Message: msg})
	return []string{msg}
}
