package workspace

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolve checks that no input escapes: a successful Resolve or
// ResolveWrite names a host file inside its plane's root, and the existing
// part of that name, with links resolved by the host, is still inside it.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"a.txt", "../../etc/passwd", "/etc", "/inputs/data.csv", "etc/passwd", "in/x",
		"sub/up/outside/secret", "sub/abs/x.txt", "/workspace/../outputs/x", "loop1/x",
		"//workspace//a", "/workspace/./sub/../../inputs", "..", "~/x", "out/secret",
	} {
		f.Add(s)
	}
	fs, outside := testFS(f)
	links(f, fs, outside)
	f.Fuzz(func(t *testing.T, in string) {
		for _, resolve := range []func(string) (Path, error){fs.Resolve, fs.ResolveWrite} {
			p, err := resolve(in)
			if err != nil {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("%q: error %v does not match ErrRefused", in, err)
				}
				continue
			}
			root := fs.Root(p.Plane)
			if !within(root, p.Host) {
				t.Fatalf("%q resolved to %q, outside %s", in, p.Host, root)
			}
			if real := realPrefix(p.Host); !within(root, real) {
				t.Fatalf("%q resolved to %q, which the host resolves to %q", in, p.Host, real)
			}
			if !strings.HasPrefix(p.PlanePath+"/", "/"+p.Plane+"/") {
				t.Fatalf("%q: plane path %q not in plane %s", in, p.PlanePath, p.Plane)
			}
		}
	})
}

// realPrefix resolves the longest existing prefix of a host name.
func realPrefix(host string) string {
	rest := ""
	for {
		if real, err := filepath.EvalSymlinks(host); err == nil {
			return filepath.Join(real, rest)
		}
		rest = filepath.Join(filepath.Base(host), rest)
		host = filepath.Dir(host)
		if host == "/" {
			return "/" + rest
		}
	}
}
