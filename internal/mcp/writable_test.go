package mcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/config"
	"github.com/apodex/apodex/internal/watch"
	"github.com/apodex/apodex/internal/workspace"
)

// A server not granted writes cannot write the planes it sees; one granted
// /workspace/reports writes there, and only there; the call's deltas name
// the file it wrote. A writable directory that is a link is refused: the
// server does not start.
func TestWritableIsEnforced(t *testing.T) {
	f := newFixture(t)
	base := t.TempDir()
	os.Chmod(base, 0o755)
	fs := &workspace.FS{Inputs: filepath.Join(base, "inputs"), Workspace: filepath.Join(base, "workspace"), Outputs: filepath.Join(base, "outputs"), Watch: watch.NewSet()}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		os.Mkdir(d, 0o777)
		os.Chmod(d, 0o777)
	}
	defer fs.Watch.Close()
	outside := t.TempDir()
	os.Chmod(outside, 0o777)
	os.Symlink(outside, filepath.Join(fs.Workspace, "link"))

	ro := testServer(t, "ro", nil)
	ro.Planes = []string{"/workspace"}
	rw := testServer(t, "rw", nil)
	rw.Planes = []string{"/workspace"}
	rw.Writable = []string{"/workspace/reports"}
	bad := testServer(t, "bad", nil)
	bad.Writable = []string{"/workspace/link"}
	env := f.env()
	env.Planes = map[string]string{"/inputs": fs.Inputs, "/workspace": fs.Workspace, "/outputs": fs.Outputs}
	env.Workspace = fs
	h := Start(context.Background(), []config.MCPServer{ro, rw, bad}, env)
	defer h.Close()

	write := func(srv, path string) string {
		t.Helper()
		return call(t, h, "mcp__"+srv+"__write_host", `{"path": "`+path+`", "text": "x"}`, srv+path).Output
	}
	if out := write("ro", "/workspace/a.txt"); !strings.Contains(out, "read-only file system") {
		t.Errorf("a server without writable wrote /workspace: %q", out)
	}
	if out := write("ro", "/workspace/reports/a.txt"); !strings.Contains(out, "cannot write") {
		t.Errorf("a server without writable wrote /workspace/reports: %q", out)
	}
	if out := write("rw", "/workspace/b.txt"); !strings.Contains(out, "read-only file system") {
		t.Errorf("a server granted /workspace/reports wrote /workspace/b.txt: %q", out)
	}
	r := call(t, h, "mcp__rw__write_host", `{"path": "/workspace/reports/r.md", "text": "report"}`, "w1")
	if !strings.HasPrefix(r.Output, "wrote /workspace/reports/r.md") {
		t.Fatalf("the granted write: %q", r.Output)
	}
	if b, err := os.ReadFile(filepath.Join(fs.Workspace, "reports", "r.md")); err != nil || string(b) != "report" {
		t.Errorf("on the host: %q %v", b, err)
	}
	if len(r.Deltas) != 1 || r.Deltas[0].Path != "/workspace/reports/r.md" || !r.Observed {
		t.Errorf("the call's deltas: %+v", r.Deltas)
	}
	for _, name := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(fs.Workspace, name)); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	for _, s := range h.Status() {
		switch s.Name {
		case "bad":
			if s.State != "failed" || !strings.Contains(s.Error, "is not a directory (a symbolic link?)") {
				t.Errorf("a writable link: %s %q", s.State, s.Error)
			}
		case "rw":
			if len(s.Writable) != 1 || s.Writable[0] != "/workspace/reports" {
				t.Errorf("rw's record: %+v", s.MCPServer)
			}
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("written through the link: %v", entries)
	}
}
