package publish

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestFileToolsNeedTheLease(t *testing.T) {
	f := newFixture(t, 0, nil)
	w := func(agent, path, content string) string {
		return `{"path": "` + path + `", "content": "` + content + `"}`
	}
	expect(t, f.call(t, "main", nil, "write_file", w("main", "/outputs/report.md", "x")), true,
		"error: cannot write /outputs/report.md: /outputs is read-only without the publishing lease: call claim_outputs with the exact paths you will deliver")
	absent(t, f.host("report.md"))

	r := f.call(t, "main", nil, "claim_outputs", `{"paths": ["/outputs/report.md"]}`)
	expect(t, r, false, "you hold the publishing lease", "/outputs/report.md  (does not exist yet)", "reconciled when the run ends")
	expect(t, f.call(t, "main", nil, "write_file", w("main", "/outputs/report.md", "# Report\\n")), false, "created /outputs/report.md")
	if read(t, f.host("report.md")) != "# Report\n" {
		t.Fatal("declared file not written")
	}
	expect(t, f.call(t, "main", nil, "edit_file", `{"path": "/outputs/report.md", "old_text": "Report", "new_text": "Sum"}`), false, "edited /outputs/report.md")
	expect(t, f.call(t, "main", nil, "write_file", w("main", "/outputs/extra.md", "x")), true,
		"cannot write /outputs/extra.md: it is not in your manifest [/outputs/report.md]; claim it with claim_outputs first")
	absent(t, f.host("extra.md"))

	// Another agent: refused by name, for writing and for claiming.
	expect(t, f.call(t, "helper", nil, "write_file", w("helper", "/outputs/report.md", "pwned")), true, "the publishing lease is held by main")
	expect(t, f.call(t, "helper", nil, "claim_outputs", `{"paths": ["/outputs/b.md"]}`), true, "the publishing lease is held by main", "nothing was claimed")
	expect(t, f.call(t, "helper", nil, "claim_outputs", `{"paths": "/outputs/b.md"}`), true, `argument "paths" of claim_outputs must be an array`)
	if read(t, f.host("report.md")) != "# Sum\n" {
		t.Fatal("report changed by a non-holder")
	}

	// A link inside scratch that leads back to /outputs does not get round
	// the lease: the path is checked where it lands.
	if err := os.Symlink("/outputs", f.host("scratch/up")); err != nil {
		t.Fatal(err)
	}
	expect(t, f.call(t, "helper", nil, "write_file", w("helper", "/outputs/scratch/up/report.md", "pwned")), true, "cannot write /outputs/report.md", "held by main")

	// After release the other agent takes over.
	f.plane.Release("main", "finished")
	expect(t, f.call(t, "helper", nil, "claim_outputs", `{"paths": ["/outputs/b.md"]}`), false, "/outputs/b.md")
	expect(t, f.call(t, "main", nil, "write_file", w("main", "/outputs/report.md", "late")), true, "held by helper")
	expect(t, f.call(t, "helper", nil, "write_file", w("helper", "/outputs/b.md", "b")), false, "created /outputs/b.md")

	// A later holder of a path an earlier one wrote is told the truth:
	// it exists, and is delivered as it stands (its baseline is absent).
	f.plane.Release("helper", "finished")
	expect(t, f.call(t, "writer", nil, "claim_outputs", `{"paths": ["/outputs/report.md"]}`), false,
		"/outputs/report.md  (exists, 6 bytes, written earlier in this run: it counts as delivered as it stands")
}

func TestScratchQuotaFileTools(t *testing.T) {
	f := newFixture(t, 100, nil)
	w := func(path string, n int) string {
		return `{"path": "` + path + `", "content": "` + strings.Repeat("s", n) + `"}`
	}
	// No lease needed for scratch.
	expect(t, f.call(t, "helper", nil, "write_file", w("/outputs/scratch/a.txt", 80)), false, "created /outputs/scratch/a.txt")
	expect(t, f.call(t, "helper", nil, "write_file", w("/outputs/scratch/deep/b.txt", 30)), true,
		"cannot write /outputs/scratch/deep/b.txt (30 bytes): it would bring scratch to 110 bytes, over its quota of 100 (80 used now)")
	absent(t, f.host("scratch/deep/b.txt"))
	// Replacing a file counts only the difference.
	expect(t, f.call(t, "main", nil, "write_file", w("/outputs/scratch/a.txt", 95)), false, "replaced")
	expect(t, f.call(t, "main", nil, "write_file", w("/outputs/scratch", 1)), true, "directory")

	// Over the quota (as a command could leave it), every write is refused
	// until files are deleted.
	put(t, f.host("scratch/flood"), strings.Repeat("z", 200))
	expect(t, f.call(t, "helper", nil, "write_file", w("/outputs/scratch/c.txt", 0)), true, "scratch quota exceeded: 295 of 100 bytes used; delete files under /outputs/scratch")
	err := f.plane.CheckWrite("helper", "/outputs/scratch/c.txt", -1)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("CheckWrite: %v", err)
	}
	os.Remove(f.host("scratch/flood"))
	expect(t, f.call(t, "helper", nil, "write_file", w("/outputs/scratch/c.txt", 5)), false, "created")
	if got := f.plane.ScratchUsage(); got != 100 {
		t.Fatalf("usage %d", got)
	}
}

func TestCheckWriteKinds(t *testing.T) {
	f := newFixture(t, 0, nil)
	for _, tt := range []struct {
		agent, path string
		want        error
	}{
		{"main", "/outputs/a", ErrNoLease},
		{"main", "/workspace/a", ErrUndeclared},
		{"main", "/outputs", ErrUndeclared},
		{"main", "/outputs/scratch/x", nil},
	} {
		if err := f.plane.CheckWrite(tt.agent, tt.path, 1); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s %s: %v, want %v", tt.agent, tt.path, err, tt.want)
		}
	}
	f.plane.Claim("main", []string{"/outputs/a"})
	if err := f.plane.CheckWrite("main", "/outputs/a", 1); err != nil {
		t.Fatal(err)
	}
	if err := f.plane.CheckWrite("main", "/outputs/b", 1); !errors.Is(err, ErrUndeclared) {
		t.Fatal(err)
	}
	if err := f.plane.CheckWrite("other", "/outputs/a", 1); !errors.Is(err, ErrNoLease) {
		t.Fatal(err)
	}
}
