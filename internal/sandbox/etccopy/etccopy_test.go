package etccopy

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeEtc builds a host /etc with allowed and forbidden entries.
func fakeEtc(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "etc")
	for _, f := range []struct {
		path, body string
		perm       fs.FileMode
	}{
		{"etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0o644},
		{"etc/shadow", "root:secret\n", 0o640},
		{"etc/ssl/certs/a.pem", "CERT\n", 0o644},
		{"etc/ssl/private/key.pem", "KEY\n", 0o600},
		{"etc/python3.11/site.py", "x\n", 0o640},
		{"etc/default/locale", "LANG=C\n", 0o644},
		{"etc/default/useradd", "SECRET\n", 0o644},
		{"run/resolv.conf", "nameserver 10.0.0.1\n", 0o644},
		{"private/notes", "not for the sandbox\n", 0o644},
	} {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.body), f.perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.perm); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []struct{ target, at string }{
		{"../run/resolv.conf", "etc/resolv.conf"},          // top level: copied through
		{"/nonexistent/zone", "etc/localtime"},             // dangling top level: skipped
		{"/usr/bin/vim.basic", "etc/alternatives/vi"},      // inside: kept as a link
		{"../../private/notes", "etc/ssl/certs/notes.pem"}, // inside: kept, resolves in the sandbox only
		{filepath.Join(root, "private"), "etc/xdg"},        // top-level directory link: walked
		{"/etc/shadow", "etc/ssl/certs/shadow-link.pem"},   // inside: a link, never its target
	} {
		p := filepath.Join(root, l.at)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.target, p); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// tree lists dir's entries as "rel mode [-> target | : content]".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		s := rel + " " + fi.Mode().String()
		switch fi.Mode().Type() {
		case fs.ModeSymlink:
			to, _ := os.Readlink(p)
			s += " -> " + to
		case 0:
			b, _ := os.ReadFile(p)
			s += " : " + strings.TrimSpace(string(b))
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCopyEtc(t *testing.T) {
	src := fakeEtc(t)
	dst := filepath.Join(t.TempDir(), "etc")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	stamp, err := copyEtc(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"alternatives drwxr-xr-x",
		"alternatives/vi Lrwxrwxrwx -> /usr/bin/vim.basic",
		"default drwxr-xr-x",
		"default/locale -rw-r--r-- : LANG=C",
		"passwd -rw-r--r-- : root:x:0:0::/root:/bin/sh",
		"python3.11 drwxr-xr-x",
		"python3.11/site.py -rw-r----- : x",
		"resolv.conf -rw-r--r-- : nameserver 10.0.0.1",
		"ssl drwxr-xr-x",
		"ssl/certs drwxr-xr-x",
		"ssl/certs/a.pem -rw-r--r-- : CERT",
		"ssl/certs/notes.pem Lrwxrwxrwx -> ../../private/notes",
		"ssl/certs/shadow-link.pem Lrwxrwxrwx -> /etc/shadow",
		"xdg drwxr-xr-x",
		"xdg/notes -rw-r--r-- : not for the sandbox",
	}
	if got := tree(t, dst); !slices.Equal(got, want) {
		t.Errorf("copy:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if etcStamp(src) != stamp {
		t.Error("stamp of an unchanged /etc differs from the copy's")
	}
}

// testCache is an Cache over src that makes its copies in a temporary
// directory and rechecks the host on every acquire.
func testCache(t *testing.T, src string) (*Cache, string) {
	t.Helper()
	base := t.TempDir()
	c := &Cache{src: src, bases: func() []string { return []string{base} }}
	return c, base
}

func acquire(t *testing.T, c *Cache) *Copy {
	t.Helper()
	c.checked = time.Time{} // as if etcRecheck had passed
	e, err := c.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEtcCacheRefreshes(t *testing.T) {
	src := fakeEtc(t)
	c, base := testCache(t, src)
	a := acquire(t, c)
	if fi, err := os.Stat(a.root); err != nil || fi.Mode().Perm() != 0o700 || filepath.Dir(a.root) != base {
		t.Fatalf("copy directory %s: %v %v", a.root, fi.Mode(), err)
	}
	if again := acquire(t, c); again != a {
		t.Fatal("unchanged /etc copied again")
	}
	c.Release(a)

	if err := os.WriteFile(filepath.Join(src, "passwd"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := acquire(t, c)
	if b == a {
		t.Fatal("changed /etc not copied again")
	}
	if got, _ := os.ReadFile(filepath.Join(b.Dir(), "passwd")); string(got) != "changed\n" {
		t.Errorf("fresh copy has passwd %q", got)
	}
	if _, err := os.Stat(a.root); err != nil {
		t.Fatalf("the old copy was removed while a sandbox used it: %v", err)
	}
	c.Release(a)
	if _, err := os.Stat(a.root); !os.IsNotExist(err) {
		t.Errorf("the old copy outlived its last sandbox: %v", err)
	}
	c.Release(b)
	if _, err := os.Stat(b.root); err != nil {
		t.Errorf("the current copy was removed: %v", err)
	}

	os.RemoveAll(b.root) // a temporary-file cleaner
	d := acquire(t, c)
	defer c.Release(d)
	if _, err := os.Stat(filepath.Join(d.Dir(), "passwd")); d == b || err != nil {
		t.Errorf("a copy removed behind our back is still handed out (%v)", err)
	}
}

func TestSweepEtc(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, lock bool) string {
		t.Helper()
		root := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o700); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(root, "lock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	dead := mk(etcPrefix+"dead", true)
	live := mk(etcPrefix+"live", true)
	young := mk(etcPrefix+"young", false) // its process is making it
	old := mk(etcPrefix+"old", false)     // its process died making it
	other := mk("other-dir", true)
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	// Another process's lock: flock belongs to the open file, not the process.
	f, err := os.Open(filepath.Join(live, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	sweepEtc(base)
	for dir, kept := range map[string]bool{dead: false, live: true, young: true, old: false, other: true} {
		if _, err := os.Stat(dir); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", filepath.Base(dir), err == nil, kept)
		}
	}
}
