package sandbox

import (
	"path/filepath"
	"testing"
)

func TestNoneDirTranslation(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	mounts := []Mount{{Source: ws, Target: "/workspace"}, {Source: out, Target: "/workspace/out"}}
	for _, tc := range []struct{ in, want string }{
		{"/workspace", ws},
		{"/workspace/a/b", filepath.Join(ws, "a/b")},
		{"/workspace/out/x", filepath.Join(out, "x")},
		{"/workspaces", "/workspaces"},
		{"/srv", "/srv"},
	} {
		if got := hostPath(mounts, tc.in); got != tc.want {
			t.Errorf("hostPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
