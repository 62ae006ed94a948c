//go:build linux

package worktree

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A view whose Manager owns views for another uid shows the lower layer's
// files as that uid's, lets that uid create, replace and remove files
// without any chown, and leaves the lower layer as it was.
func TestOwnViewsIdmapsTheLowerLayer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root")
	}
	lower, root := t.TempDir(), t.TempDir()
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755) // the sandbox uid must reach the view
	os.MkdirAll(filepath.Join(lower, "pkg"), 0o755)
	os.WriteFile(filepath.Join(lower, "pkg", "a.txt"), []byte("a\n"), 0o444)
	os.WriteFile(filepath.Join(lower, "b.txt"), []byte("b\n"), 0o444)
	m := NewManager(nil)
	defer m.Close()
	const uid = 65534
	m.OwnViews(uid, uid)
	v, err := m.CreateView(lower, root, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.IDMap != IDMapped {
		t.Skipf("no idmapped lower layer here: %s", v.IDMap)
	}
	for _, rel := range []string{".", "pkg", "pkg/a.txt", "b.txt"} {
		fi, err := os.Lstat(filepath.Join(v.Dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != uid {
			t.Errorf("%s shows owner %d:%d, want %d", rel, st.Uid, st.Gid, uid)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", "echo new > pkg/new.txt && chmod u+w pkg/a.txt && echo changed > pkg/a.txt && rm b.txt")
	cmd.Dir = v.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the sandbox uid cannot work in the view: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(lower, "pkg", "a.txt")); string(b) != "a\n" {
		t.Errorf("a write in the view reached lower: %q", b)
	}
	for _, rel := range []string{"pkg/a.txt", "b.txt"} {
		fi, err := os.Lstat(filepath.Join(lower, rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0o444 {
			t.Errorf("lower %s is now %d %v", rel, st.Uid, fi.Mode())
		}
	}
	// Only what changed is in upper: the new file, the rewritten one, the
	// whiteout of the removed one.
	var up []string
	filepath.Walk(v.Upper(), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(v.Upper(), p)
			up = append(up, rel)
		}
		return nil
	})
	if len(up) != 3 {
		t.Errorf("upper holds %v, want pkg/new.txt, pkg/a.txt and the whiteout of b.txt", up)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "v")); err == nil {
		t.Fatal("Close left the view (or its lower bind) behind")
	}
}
