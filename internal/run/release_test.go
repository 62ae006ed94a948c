package run_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/watch"
)

// TestPlanesUnwatchedAtTheEnd: the directories a run watched while its
// agent worked (the planes, in the session's Set) are no longer watched
// once Execute returns (their inotify watches are torn down while the
// record is closed, not at process exit), and nothing else remembers them.
func TestPlanesUnwatchedAtTheEnd(t *testing.T) {
	var ws string
	watchedDuring := false
	cfg := config(t, "unwatch", func(turn int, req *llm.Request) (*llm.Response, error) {
		switch turn {
		case 0:
			return scripted.Calls(call("bash", map[string]string{"command": "echo a > a.txt"})), nil
		case 1:
			watchedDuring = ws != "" && watch.Watching(ws)
		}
		return scripted.Calls(finish("done")...), nil
	})
	cfg.Sandbox = runtest.SandboxKind()
	ws = filepath.Join(cfg.Home, "runs", "unwatch", "workspace")
	s, err := run.Execute(context.Background(), cfg)
	if err != nil || s.Status != run.StatusCompleted {
		t.Fatalf("run: %v %+v", err, s)
	}
	if got := filepath.Join(s.RunDir, "workspace"); got != ws {
		t.Fatalf("workspace at %s, the test looked at %s", got, ws)
	}
	if !watchedDuring {
		t.Fatal("the workspace was not watched while the agent worked: the test shows nothing")
	}
	for _, dir := range []string{ws, filepath.Join(s.RunDir, "outputs"), filepath.Join(s.RunDir, "outputs", "scratch")} {
		if watch.Watching(dir) {
			t.Errorf("%s is still watched after the run", dir)
		}
	}
}
