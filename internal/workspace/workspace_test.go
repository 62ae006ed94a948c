package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// testFS builds three planes and an outside directory holding a secret:
//
//	inputs/data.csv
//	workspace/a.txt  workspace/sub/b.txt  workspace/real/x.txt
//	outputs/
//	outside/secret
func testFS(t testing.TB) (*FS, string) {
	t.Helper()
	base := t.TempDir()
	fs := &FS{
		Inputs:    filepath.Join(base, "inputs"),
		Workspace: filepath.Join(base, "workspace"),
		Outputs:   filepath.Join(base, "outputs"),
	}
	outside := filepath.Join(base, "outside")
	for _, d := range []string{fs.Inputs, fs.Outputs, outside, filepath.Join(fs.Workspace, "sub"), filepath.Join(fs.Workspace, "real")} {
		mkdir(t, d)
	}
	write(t, filepath.Join(fs.Inputs, "data.csv"), "a,b\n1,2\n")
	write(t, filepath.Join(fs.Workspace, "a.txt"), "alpha\n")
	write(t, filepath.Join(fs.Workspace, "sub", "b.txt"), "beta\n")
	write(t, filepath.Join(fs.Workspace, "real", "x.txt"), "x\n")
	write(t, filepath.Join(outside, "secret"), "secret\n")
	return fs, outside
}

func mkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, name, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// links adds the symbolic links the escape tests need.
func links(t testing.TB, fs *FS, outside string) {
	t.Helper()
	ws := fs.Workspace
	symlink(t, "/etc", filepath.Join(ws, "etc"))
	symlink(t, "/inputs", filepath.Join(ws, "in"))
	symlink(t, fs.Inputs, filepath.Join(ws, "inhost"))
	symlink(t, outside, filepath.Join(ws, "out"))
	symlink(t, "../..", filepath.Join(ws, "sub", "up"))
	symlink(t, "/workspace/real", filepath.Join(ws, "sub", "abs"))
	symlink(t, "../real", filepath.Join(ws, "sub", "rel"))
	symlink(t, "x.txt", filepath.Join(ws, "real", "link.txt"))
	symlink(t, "loop2", filepath.Join(ws, "loop1"))
	symlink(t, "loop1", filepath.Join(ws, "loop2"))
}

func TestResolve(t *testing.T) {
	fs, outside := testFS(t)
	links(t, fs, outside)
	tests := []struct {
		in, want string // want: plane path, or "!" + a fragment of the error
	}{
		{"a.txt", "/workspace/a.txt"},
		{"./sub/../a.txt", "/workspace/a.txt"},
		{"/workspace", "/workspace"},
		{".", "/workspace"},
		{"/inputs/data.csv", "/inputs/data.csv"},
		{"/outputs/report.md", "/outputs/report.md"},
		{"/workspace/../inputs/data.csv", "/inputs/data.csv"},
		{"new/dir/file", "/workspace/new/dir/file"},
		{"sub/abs/x.txt", "/workspace/real/x.txt"},
		{"sub/rel/x.txt", "/workspace/real/x.txt"},
		{"real/link.txt", "/workspace/real/x.txt"},
		{"", "!path is empty"},
		{"/", "!outside the planes"},
		{"/etc/passwd", "!outside the planes"},
		{"/root", "!outside the planes"},
		{"/workspacefoo/a", "!outside the planes"},
		{"../../etc/passwd", "!climbs out"},
		{"/inputs/../../etc", "!climbs out"},
		{"a\x00b", "!NUL"},
		{"etc/passwd", "!outside /workspace"},
		{"etc", "!outside /workspace"},
		{"in/data.csv", "!use the path /inputs/data.csv directly"},
		{"inhost/data.csv", "!outside /workspace"},
		{"out/secret", "!outside /workspace"},
		{"sub/up/outside/secret", "!outside /workspace"},
		{"loop1", "!too many levels"},
		{"a.txt/x", "!not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := fs.Resolve(tt.in)
			check(t, fs, p, err, tt.want)
		})
	}
}

func check(t *testing.T, fs *FS, p Path, err error, want string) {
	t.Helper()
	if frag, refused := strings.CutPrefix(want, "!"); refused {
		if err == nil {
			t.Fatalf("got %+v, want refusal containing %q", p, frag)
		}
		if !strings.Contains(err.Error(), frag) {
			t.Fatalf("error %q does not contain %q", err, frag)
		}
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("error %q does not match ErrRefused", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if p.PlanePath != want {
		t.Fatalf("plane path %q, want %q", p.PlanePath, want)
	}
	if p.Host != fs.path(p.Plane, p.Rel).Host || !within(fs.Root(p.Plane), p.Host) {
		t.Fatalf("host %q is not under the %s root", p.Host, p.Plane)
	}
}

func within(root, host string) bool {
	rel, err := filepath.Rel(root, host)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

func TestResolveWrite(t *testing.T) {
	fs, outside := testFS(t)
	links(t, fs, outside)
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(fs.Workspace, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fs.Workspace, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"a.txt", "/workspace/a.txt"},
		{"new/dir/f.txt", "/workspace/new/dir/f.txt"},
		{"sub/abs/new.txt", "/workspace/real/new.txt"},
		{"/inputs/data.csv", "!/inputs is read-only"},
		{"/inputs/new.txt", "!/inputs is read-only"},
		{"/workspace/../inputs/new.txt", "!/inputs is read-only"},
		{"/outputs/report.md", "!/outputs is read-only in this run; write your files under /workspace"},
		{"/workspace", "!plane directory"},
		{"sub", "!is a directory"},
		{"real/link.txt", "!symbolic link"},
		{"in/new.txt", "!outside /workspace"},
		{"inhost/data.csv", "!outside /workspace"},
		{"etc/passwd", "!outside /workspace"},
		{"out/secret", "!outside /workspace"},
		{"etc", "!symbolic link"},
		{"hard", "!2 hard links"},
		{"fifo", "!not a regular file"},
		{"/etc/passwd", "!outside the planes"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := fs.ResolveWrite(tt.in)
			check(t, fs, p, err, tt.want)
		})
	}
}

func TestOutputsWriteHook(t *testing.T) {
	fs, _ := testFS(t)
	var sizes []int64
	fs.OutputsWrite = func(pp string, size int64) error {
		sizes = append(sizes, size)
		switch {
		case pp == "/outputs/report.md" && size <= 10:
			return nil
		case pp == "/outputs/report.md":
			return errors.New("too big")
		}
		return errors.New(pp + " is not in your manifest")
	}
	p, err := fs.ResolveWrite("/outputs/report.md")
	if err != nil {
		t.Fatalf("declared path refused: %v", err)
	}
	if err := fs.WriteFile(p, []byte("ok\n")); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile(p, []byte("far too big\n")); err == nil || !errors.Is(err, ErrRefused) {
		t.Fatalf("WriteFile did not ask the hook with the size: %v", err)
	}
	if got, _ := os.ReadFile(p.Host); string(got) != "ok\n" || len(sizes) != 3 || sizes[0] != -1 || sizes[1] != 3 || sizes[2] != 12 {
		t.Fatalf("content %q, hook sizes %v", got, sizes)
	}
	if _, err := fs.ResolveWrite("/outputs/other.md"); err == nil || !strings.Contains(err.Error(), "not in your manifest") || !errors.Is(err, ErrRefused) {
		t.Fatalf("undeclared path: %v", err)
	}
	fs.OutputsWrite = nil
	if err := fs.WriteFile(p, []byte("x")); err == nil {
		t.Fatal("WriteFile wrote /outputs without a hook")
	}
}

func TestWriteFile(t *testing.T) {
	fs, _ := testFS(t)
	if err := os.Chmod(filepath.Join(fs.Workspace, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, content string }{
		{"deep/er/new.txt", "new\n"},
		{"a.txt", "replaced, longer than before\n"},
		{"a.txt", "short\n"},
	} {
		p, err := fs.ResolveWrite(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile(p, []byte(tt.content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p.Host)
		if err != nil || string(got) != tt.content {
			t.Fatalf("%s: got %q, %v; want %q", tt.path, got, err, tt.content)
		}
	}
	fi, err := os.Stat(filepath.Join(fs.Workspace, "a.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("existing mode not kept: %v %v", fi.Mode(), err)
	}
	if err := fs.WriteFile(Path{Plane: Inputs, Rel: "x", PlanePath: "/inputs/x"}, nil); err == nil {
		t.Fatal("WriteFile wrote to /inputs")
	}
}

func TestWriteFileLinkSwappedIn(t *testing.T) {
	fs, outside := testFS(t)
	p, err := fs.ResolveWrite("swap/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	// After the check, the parent becomes a link out of the plane.
	symlink(t, outside, filepath.Join(fs.Workspace, "swap"))
	if err := fs.WriteFile(p, []byte("pwned")); err == nil {
		t.Fatal("WriteFile followed a link out of the plane")
	}
	if _, err := os.Stat(filepath.Join(outside, "f.txt")); err == nil {
		t.Fatal("file written outside the plane")
	}
}

func TestOpenDoesNotFollowOut(t *testing.T) {
	fs, outside := testFS(t)
	p, err := fs.Resolve("later/secret")
	if err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(fs.Workspace, "later"))
	if f, err := fs.Open(p); err == nil {
		f.Close()
		t.Fatal("Open followed a link out of the plane")
	}
}

func TestHashFile(t *testing.T) {
	fs, _ := testFS(t)
	h, n, err := HashFile(filepath.Join(fs.Workspace, "a.txt"))
	if err != nil || n != 6 || h != HashBytes([]byte("alpha\n")) || !strings.HasPrefix(h, "sha256:") || len(h) != 7+64 {
		t.Fatalf("HashFile = %q, %d, %v", h, n, err)
	}
	if _, _, err := HashFile(fs.Workspace); err == nil {
		t.Fatal("hashed a directory")
	}
}

func TestWriteFileFinalLinkSwappedIn(t *testing.T) {
	fs, outside := testFS(t)
	p, err := fs.ResolveWrite("w.txt")
	if err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(outside, "secret"), filepath.Join(fs.Workspace, "w.txt"))
	if err := fs.WriteFile(p, []byte("pwned")); err == nil || !errors.Is(err, ErrRefused) {
		t.Fatalf("WriteFile wrote through a final link: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "secret\n" {
		t.Fatalf("secret changed: %q", got)
	}
	// A successful write leaves no temporary file behind.
	p, _ = fs.ResolveWrite("clean.txt")
	if err := fs.WriteFile(p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(fs.Workspace)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".apodex-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

// ReadRegular never reads through a link, even one inside the plane, and
// refuses a file larger than asked.
func TestReadRegular(t *testing.T) {
	fs, _ := testFS(t)
	host := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(host, []byte("host"), 0o644)
	os.WriteFile(filepath.Join(fs.Workspace, "f"), []byte("mine"), 0o644)
	p, err := fs.Resolve("/workspace/f")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadRegular(p, 4); err != nil || string(b) != "mine" {
		t.Fatalf("ReadRegular = %q, %v", b, err)
	}
	if _, err := fs.ReadRegular(p, 3); err == nil {
		t.Fatal("read past the limit")
	}
	for _, target := range []string{host, "inner"} {
		os.Remove(filepath.Join(fs.Workspace, "f"))
		os.WriteFile(filepath.Join(fs.Workspace, "inner"), []byte("inner"), 0o644)
		os.Symlink(target, filepath.Join(fs.Workspace, "f")) // swapped in after Resolve
		if b, err := fs.ReadRegular(p, 100); err == nil {
			t.Fatalf("read %q through a link to %s", b, target)
		}
		if _, _, err := fs.Hash(p); err == nil {
			t.Fatalf("hashed through a link to %s", target)
		}
	}
}
