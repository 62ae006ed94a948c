package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sparse file whose apparent size is past its mount's quota is removed
// after the command and named; one under the quota, and real data beside
// it, stay.
func TestSparseGiantsRemoved(t *testing.T) {
	for name, r := range trackedOrNot(sandboxes(t)) {
		tracked := strings.HasSuffix(name, "/tracked")
		t.Run(name, func(t *testing.T) {
			ws, out := t.TempDir(), t.TempDir()
			mounts := []Mount{
				{Source: ws, Target: "/workspace", Writable: true, Watch: watchedIf(t, tracked)},
				{Source: out, Target: "/staged", Writable: true}, // no quota: the workspace's applies
			}
			res := run(t, r, Spec{Mounts: mounts, Limits: Limits{Workspace: Quota{Bytes: 64 << 20}},
				Command: "truncate -s 20G /workspace/giant && truncate -s 1M /workspace/small && truncate -s 1T /staged/deliverable && echo data > /workspace/ok"})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			if res.Limit != LimitSparse || !strings.Contains(res.LimitNote(), "/workspace/giant") || !strings.Contains(res.LimitNote(), "/staged/deliverable") {
				t.Errorf("limit %q note %q", res.Limit, res.LimitNote())
			}
			for _, gone := range []string{filepath.Join(ws, "giant"), filepath.Join(out, "deliverable")} {
				if _, err := os.Lstat(gone); err == nil {
					t.Errorf("%s kept", gone)
				}
			}
			if fi, err := os.Stat(filepath.Join(ws, "small")); err != nil || fi.Size() != 1<<20 {
				t.Errorf("a sparse file under the quota: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "ok")); string(b) != "data\n" {
				t.Errorf("ok = %q", b)
			}
		})
	}
}
