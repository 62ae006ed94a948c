package publish

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
)

func bwrap(t *testing.T) sandbox.Runner {
	t.Helper()
	r, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func bash(t *testing.T, f *fixture, agent string, runner sandbox.Runner, command string) tool.Result {
	t.Helper()
	q, _ := jsonString(command)
	r := f.call(t, agent, runner, "bash", `{"command": `+q+`, "timeout_s": 20}`)
	// Every command leaves the staging area empty.
	if ents, err := os.ReadDir(f.staging); err != nil || len(ents) != 0 {
		t.Fatalf("staging not cleaned: %v %v", ents, err)
	}
	return r
}

func TestBashWithoutLease(t *testing.T) {
	runner := bwrap(t)
	f := newFixture(t, 0, map[string]string{"seen.txt": "visible\n"})
	r := bash(t, f, "helper", runner, "cat /outputs/seen.txt; echo x > /outputs/a")
	expect(t, r, false, "visible", "Read-only file system",
		"note: /outputs is read-only without the publishing lease: call claim_outputs with the exact paths you will deliver")
	absent(t, f.host("a"))

	// Scratch is writable without the lease, and its changes are deltas.
	r = bash(t, f, "helper", runner, "echo s > /outputs/scratch/s.txt && echo ok")
	expect(t, r, false, "exit code: 0", "ok")
	if read(t, f.host("scratch/s.txt")) != "s\n" || len(r.Deltas) != 1 || r.Deltas[0].Path != "/outputs/scratch/s.txt" {
		t.Fatalf("scratch write: deltas %+v", r.Deltas)
	}
	if strings.Contains(r.Output, "note:") {
		t.Fatalf("unexpected note:\n%s", r.Output)
	}

	// While another agent holds the lease, the note names it.
	f.plane.Claim("main", []string{"/outputs/a"})
	r = bash(t, f, "helper", runner, "cp /inputs/data.csv /outputs/a")
	expect(t, r, false, "Read-only file system", "the publishing lease is held by main")
	absent(t, f.host("a"))
}

func TestBashHolderCommits(t *testing.T) {
	runner := bwrap(t)
	f := newFixture(t, 0, map[string]string{"old.txt": "old\n"})
	decl := []string{"/outputs/report.md", "/outputs/sub/r2.md", "/outputs/link.md", "/outputs/hard.md", "/outputs/dir.md", "/outputs/fifo.md", "/outputs/old.txt"}
	if _, err := f.plane.Claim("main", decl); err != nil {
		t.Fatal(err)
	}
	r := bash(t, f, "main", runner, strings.Join([]string{
		"cat /outputs/old.txt",
		"echo hi > /outputs/report.md",
		"mkdir -p /outputs/sub && echo r2 > /outputs/sub/r2.md",
		"echo extra > /outputs/extra.txt",
		"ln -s /etc/passwd /outputs/link.md",
		"echo h > /outputs/h0 && ln /outputs/h0 /outputs/hard.md",
		"mkdir /outputs/dir.md",
		"mkfifo /outputs/fifo.md",
		"echo tmp > /outputs/scratch/t",
		"ls /outputs/scratch",
	}, "; "))
	expect(t, r, false, "old\n", "--- /outputs ---",
		"kept /outputs/report.md (3 bytes)",
		"kept /outputs/sub/r2.md (3 bytes)",
		"refused /outputs/link.md: /outputs/link.md is a symbolic link (to /etc/passwd)",
		"refused /outputs/hard.md: it has 2 hard links",
		"refused /outputs/dir.md: /outputs/dir.md is a directory",
		"refused /outputs/fifo.md: /outputs/fifo.md is not a regular file",
		"not delivered: /outputs/extra.txt, /outputs/h0 are not in the manifest")
	if read(t, f.host("report.md")) != "hi\n" || read(t, f.host("sub/r2.md")) != "r2\n" || read(t, f.host("scratch/t")) != "tmp\n" {
		t.Fatal("declared files not committed")
	}
	for _, name := range []string{"extra.txt", "h0", "link.md", "hard.md", "dir.md", "fifo.md"} {
		absent(t, f.host(name))
	}
	var paths []string
	for _, d := range r.Deltas {
		paths = append(paths, d.Path)
	}
	if !slices.Equal(paths, []string{"/outputs/report.md", "/outputs/scratch/t", "/outputs/sub/r2.md"}) {
		t.Fatalf("deltas %v", paths)
	}

	// A symlink to an input, a link through a linked parent, and a
	// deletion.
	r = bash(t, f, "main", runner, "ln -sf /inputs/data.csv /outputs/report.md; rm -r /outputs/sub && ln -s /inputs /outputs/sub; rm /outputs/old.txt")
	expect(t, r, false,
		"refused /outputs/report.md: /outputs/report.md is a symbolic link (to /inputs/data.csv)",
		"refused /outputs/sub/r2.md: /outputs/sub is a symbolic link (to /inputs)",
		"removed /outputs/old.txt")
	if read(t, f.host("report.md")) != "hi\n" || read(t, f.host("sub/r2.md")) != "r2\n" {
		t.Fatal("a refused path changed")
	}
	absent(t, f.host("old.txt"))
	filepath.Walk(f.outputs, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
			t.Errorf("outputs holds %s (%s)", p, fi.Mode())
		}
		return nil
	})

	// A command that does not touch /outputs says nothing about it; a
	// killed command commits nothing.
	r = bash(t, f, "main", runner, "echo quiet")
	if strings.Contains(r.Output, "/outputs") {
		t.Fatalf("quiet command:\n%s", r.Output)
	}
	r = f.call(t, "main", runner, "bash", `{"command": "echo partial > /outputs/report.md; sleep 30", "timeout_s": 1}`)
	expect(t, r, false, "timed out", "the command did not finish, so nothing it wrote under /outputs was kept")
	if read(t, f.host("report.md")) != "hi\n" {
		t.Fatal("a killed command committed")
	}

	// The holder's undeclared write is refused in bash as in the file tools;
	// after release the holder's bash sees /outputs read-only.
	f.plane.Release("main", "finished")
	r = bash(t, f, "main", runner, "echo again > /outputs/report.md")
	expect(t, r, false, "Read-only file system", "call claim_outputs")
	if read(t, f.host("report.md")) != "hi\n" {
		t.Fatal("written after release")
	}
}

func TestBashScratchQuota(t *testing.T) {
	runner := bwrap(t)
	f := newFixture(t, 1000, nil)
	r := bash(t, f, "helper", runner, "head -c 2000 /dev/zero > /outputs/scratch/big")
	expect(t, r, false, "note: scratch quota exceeded: 2000 of 1000 bytes used; delete files under /outputs/scratch")
	expect(t, f.call(t, "helper", nil, "write_file", `{"path": "/outputs/scratch/x", "content": "x"}`), true, "scratch quota exceeded: 2000 of 1000")
	// The holder's commands report it too, and deleting frees it.
	f.plane.Claim("main", []string{"/outputs/r.md"})
	expect(t, bash(t, f, "main", runner, "echo r > /outputs/r.md"), false, "kept /outputs/r.md", "scratch quota exceeded")
	r = bash(t, f, "helper", runner, "rm /outputs/scratch/big")
	if strings.Contains(r.Output, "quota") {
		t.Fatalf("quota still reported:\n%s", r.Output)
	}
	expect(t, f.call(t, "helper", nil, "write_file", `{"path": "/outputs/scratch/x", "content": "x"}`), false, "created")
}

func jsonString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// The footer names the state of every declared path, a file rewritten with
// its own bytes included.
func TestBashFooterListsEveryDeclaredPath(t *testing.T) {
	runner := bwrap(t)
	f := newFixture(t, 0, nil)
	decl := []string{"/outputs/a.md", "/outputs/b.md", "/outputs/c.md"}
	if _, err := f.plane.Claim("main", decl); err != nil {
		t.Fatal(err)
	}
	r := bash(t, f, "main", runner, "echo same > /outputs/a.md; echo b > /outputs/b.md")
	expect(t, r, false, "kept /outputs/a.md (5 bytes)", "kept /outputs/b.md (2 bytes)", "not written yet: /outputs/c.md")
	r = bash(t, f, "main", runner, "sleep 0.01; echo same > /outputs/a.md")
	expect(t, r, false, "--- /outputs ---",
		"unchanged /outputs/a.md (5 bytes): rewritten with identical bytes",
		"unchanged /outputs/b.md (2 bytes)",
		"not written yet: /outputs/c.md")
	if read(t, f.host("a.md")) != "same\n" {
		t.Fatal("a.md changed")
	}
}
