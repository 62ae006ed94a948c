package hostfs_test

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/apodex/apodex/internal/hostfs"
)

func TestReadsNeverFollowLinks(t *testing.T) {
	run, _, _ := setup(t)
	os.WriteFile(run+"/sub/ok", []byte("mine"), 0o644)
	os.Symlink("ok", run+"/sub/near") // a final link that stays inside
	if err := syscall.Mkfifo(run+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := hostfs.ReadFile(run, "sub/ok", 0)
	if err != nil || string(b) != "mine" {
		t.Fatalf("a plain file: %q, %v", b, err)
	}
	cases := []struct {
		name, link string // link: the element the error must name
		want       error
	}{
		{"fin", "fin", hostfs.ErrLink},
		{"abs/secret", "abs", hostfs.ErrLink},
		{"rel/secret", "rel", hostfs.ErrLink},
		{"inner/ok", "inner", hostfs.ErrLink},
		{"sub/near", "sub/near", hostfs.ErrLink},
		{"fifo", "", hostfs.ErrNotRegular},
		{"sub", "", hostfs.ErrNotRegular},
		{"../host/secret", "", hostfs.ErrName},
		{"/etc/passwd", "", hostfs.ErrName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := hostfs.ReadFile(run, c.name, 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("read %s: %q, %v; want %v", c.name, b, err, c.want)
			}
			if c.link != "" && err.Error() != c.link+" is a symbolic link; not followed" {
				t.Fatalf("the refusal does not name the link %s: %v", c.link, err)
			}
		})
	}
	if _, err := hostfs.ReadFile(run, "sub/ok", 2); err == nil || !strings.Contains(err.Error(), "over the 2") {
		t.Fatalf("a file over max was read: %v", err)
	}
}
