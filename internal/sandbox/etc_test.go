package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/apodex/apodex/internal/sandbox"

	"github.com/apodex/apodex/internal/sandbox/etccopy"
)

// allowedName reports whether rel (a path in the sandbox's /etc) is an
// etccopy.Allow entry, inside one, or a parent of one.
func allowedName(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, pat := range etccopy.Allow {
		pp := strings.Split(pat, "/")
		n := min(len(parts), len(pp))
		ok := true
		for i := 0; i < n && ok; i++ {
			ok, _ = filepath.Match(pp[i], parts[i])
		}
		if ok {
			return true
		}
	}
	return false
}

func TestBwrapEtcIsTheAllowList(t *testing.T) {
	b := needBwrap(t)
	res := sh(t, b, Spec{Command: "cd /etc && find . -mindepth 1"})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d %q", res.ExitCode, res.Stderr)
	}
	for _, p := range strings.Fields(string(res.Stdout)) {
		if rel := strings.TrimPrefix(p, "./"); !allowedName(rel) {
			t.Errorf("/etc/%s is visible but not allowed", rel)
		}
	}
	for _, rel := range []string{"shadow", "gshadow", "sudoers", "ssh", "ssl/private", "apt"} {
		if allowedName(rel) {
			t.Errorf("allowedName(%q) is true; the check is broken", rel)
		}
	}
	host, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skip(err)
	}
	if res := sh(t, b, Spec{Command: "cat /etc/passwd"}); string(res.Stdout) != string(host) {
		t.Errorf("/etc/passwd in the sandbox differs from the host's")
	}
}

func TestBwrapEtcIsReadOnly(t *testing.T) {
	b := needBwrap(t)
	for _, cmd := range []string{
		"echo x > /etc/passwd", "echo x >> /etc/hosts", "rm -f /etc/passwd", "touch /etc/new",
		"mkdir /etc/new", "ln -s /tmp /etc/new", "chmod 777 /etc", "mv /etc/passwd /etc/p",
		"mount -o remount,rw /etc && touch /etc/new",
		"mount -t tmpfs none /etc",
	} {
		if res := sh(t, b, Spec{Command: cmd}); res.ExitCode == 0 {
			t.Errorf("%q succeeded", cmd)
		}
	}
	// The copy on the host is private and out of the sandbox's sight.
	e, err := etccopy.Host.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer etccopy.Host.Release(e)
	if fi, err := os.Stat(filepath.Dir(e.Dir())); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("copy directory %s mode %v (%v), want 0700", filepath.Dir(e.Dir()), fi.Mode(), err)
	}
	if res := sh(t, b, Spec{Command: "ls " + filepath.Dir(e.Dir()) + " || ls /dev/shm/" + filepath.Base(filepath.Dir(e.Dir()))}); res.ExitCode == 0 {
		t.Errorf("the host copy %s is visible in the sandbox: %q", filepath.Dir(e.Dir()), res.Stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(e.Dir(), "passwd")); len(got) > 0 {
		if host, _ := os.ReadFile("/etc/passwd"); string(host) != string(got) {
			t.Error("a sandbox changed the host copy of /etc/passwd")
		}
	}
}
