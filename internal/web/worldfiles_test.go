package web_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/web"
)

// A world rollout keeps only what it changed (runfiles.Base): the page
// serves its untouched files from the stored world, not the ones it
// removed, and still follows no link there; a base that is not plainly
// one serves nothing of the world.
func TestWorldRolloutFilesReadThroughTheirBase(t *testing.T) {
	home := t.TempDir()
	dir := fakeRun(t, home, "r1")
	const id = "w-0123456789ab"
	ws := filepath.Join(home, "worlds", id, "workspace")
	os.MkdirAll(filepath.Join(ws, "lib"), 0o755)
	os.WriteFile(filepath.Join(ws, "lib", "a.py"), []byte("A = 1"), 0o444)
	os.WriteFile(filepath.Join(ws, "gone.py"), []byte("gone"), 0o444)
	os.Symlink(filepath.Join(home, "secret.txt"), filepath.Join(ws, "lib", "link.py"))
	if err := runfiles.WriteBase(dir, runfiles.Base{World: id, Removed: []string{"gone.py"}}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, web.Config{Home: home})
	for _, a := range []attempt{
		{"an untouched file of the world", "GET", "/api/runs/r1/files/workspace/lib/a.py", "", nil, "", 200},
		{"a file of the run's own", "GET", "/api/runs/r1/files/workspace/w.txt", "", nil, "", 200},
		{"a file the rollout removed", "GET", "/api/runs/r1/files/workspace/gone.py", "", nil, "", 404},
		{"a link in the world", "GET", "/api/runs/r1/files/workspace/lib/link.py", "", nil, "", 403},
		{"a directory of the world", "GET", "/api/runs/r1/files/workspace/lib", "", nil, "", 404},
	} {
		t.Run(a.name, func(t *testing.T) { try(t, srv, a) })
	}
	resp, err := http.Get(srv.URL + "/api/runs/r1/files/workspace/lib/a.py")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "A = 1" {
		t.Errorf("the world's file reads %q", b)
	}
	os.WriteFile(filepath.Join(dir, runfiles.BaseFile), []byte(`{"world":"../../secret.txt"}`), 0o644)
	try(t, srv, attempt{"a base naming no world", "GET", "/api/runs/r1/files/workspace/lib/a.py", "", nil, "", 404})
}
