package hostfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/hostfs"
)

// setup makes run/ (the confined directory) next to host/ (what must never
// be written), with a host file and links from inside run to the host.
func setup(t *testing.T) (run, host string, d *hostfs.Dir) {
	t.Helper()
	base := t.TempDir()
	run, host = filepath.Join(base, "run"), filepath.Join(base, "host")
	for _, p := range []string{run + "/sub", host} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(host+"/secret", []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(host, run+"/abs")           // absolute link out
	os.Symlink("../host", run+"/rel")      // relative link out
	os.Symlink("sub", run+"/inner")        // link that stays inside
	os.Symlink(host+"/secret", run+"/fin") // final link to a host file
	d, err := hostfs.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return run, host, d
}

func hostUntouched(t *testing.T, host string) {
	t.Helper()
	entries, _ := os.ReadDir(host)
	if len(entries) != 1 {
		t.Fatalf("host directory was written: %v", entries)
	}
	if b, _ := os.ReadFile(host + "/secret"); string(b) != "host" {
		t.Fatalf("host file changed: %q", b)
	}
}

func TestWritesNeverLeave(t *testing.T) {
	run, host, d := setup(t)
	cases := []struct {
		name string
		want error // nil: any error
	}{
		{"../host/secret", hostfs.ErrName},
		{"sub/../../host/x", hostfs.ErrName},
		{host + "/x", hostfs.ErrName},
		{"/etc/x", hostfs.ErrName},
		{"", hostfs.ErrName},
		{"a//b", hostfs.ErrName},
		{"./a", hostfs.ErrName},
		{"a\\b", hostfs.ErrName},
		{"a\x00b", hostfs.ErrName},
		{"abs/x", hostfs.ErrLink},
		{"abs/secret", hostfs.ErrLink},
		{"rel/x", hostfs.ErrLink},
		{"inner/x", hostfs.ErrLink}, // inside, but still a link: refused
		{"abs/new/deep/x", hostfs.ErrLink},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, "/", "|"), func(t *testing.T) {
			err := d.WriteFile(c.name, []byte("pwned"), 0o644)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("WriteFile(%q) = %v, want %v", c.name, err, c.want)
			}
			if err := d.Remove(c.name); c.want == hostfs.ErrLink && !errors.Is(err, hostfs.ErrLink) {
				t.Fatalf("Remove(%q) = %v, want ErrLink", c.name, err)
			}
			if err := d.Symlink("x", c.name); err == nil {
				t.Fatalf("Symlink(%q) succeeded", c.name)
			}
			if err := d.MkdirAll(c.name, 0o755); err == nil {
				t.Fatalf("MkdirAll(%q) succeeded", c.name)
			}
			hostUntouched(t, host)
		})
	}
	if _, err := os.Stat(run + "/sub/x"); err == nil {
		t.Fatal("wrote through the inner link")
	}
}

func TestReplaceReplacesAFinalLink(t *testing.T) {
	run, host, d := setup(t)
	if err := d.WriteFile("fin", []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostUntouched(t, host)
	fi, err := os.Lstat(run + "/fin")
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("fin is not a regular file now: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(run + "/fin"); string(b) != "mine" {
		t.Fatalf("fin = %q", b)
	}
}

func TestReplaceWantedHash(t *testing.T) {
	run, _, d := setup(t)
	_, _, err := d.Replace("sub/f", strings.NewReader("abc"), 0o600, hostfs.HashPrefix+"00")
	if !errors.Is(err, hostfs.ErrChanged) {
		t.Fatalf("err = %v, want ErrChanged", err)
	}
	entries, _ := os.ReadDir(run + "/sub")
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	n, sum, err := d.Replace("sub/f", strings.NewReader("abc"), 0o600, "")
	if err != nil || n != 3 || !strings.HasPrefix(sum, hostfs.HashPrefix) {
		t.Fatalf("Replace = %d %q %v", n, sum, err)
	}
	if _, _, err := d.Replace("sub/f", strings.NewReader("abc"), 0o600, sum); err != nil {
		t.Fatalf("Replace with the right hash: %v", err)
	}
	if fi, _ := os.Stat(run + "/sub/f"); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

// TestSwappedParentRace swaps a directory for a link to the host while
// writes go on under it: none may land outside.
func TestSwappedParentRace(t *testing.T) {
	run, host, d := setup(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.RemoveAll(run + "/swap")
			if i%2 == 0 {
				os.Mkdir(run+"/swap", 0o755)
			} else {
				os.Symlink(host, run+"/swap")
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		d.WriteFile("swap/secret", []byte("pwned"), 0o644)
		d.WriteFile("swap/new", []byte("pwned"), 0o644)
		d.Remove("swap/secret")
	}
	close(stop)
	wg.Wait()
	hostUntouched(t, host)
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{".a.apodex-12": true, ".a.apodex-merge-1": true, "a.apodex-1": false, ".a": false} {
		if hostfs.IsTemp(name) != want {
			t.Errorf("IsTemp(%q) != %v", name, want)
		}
	}
}
