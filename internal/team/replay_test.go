package team

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
)

// TestReplayDeltasConfined is E2 of issue 11 and its variants: resume
// rebuilds a subagent's worktree from its recorded deltas, and no delta,
// whatever the record or the shared workspace holds, writes outside it.
func TestReplayDeltasConfined(t *testing.T) {
	delta := func(seq int64, p, content string) seqDelta {
		return seqDelta{seq: seq, FileDelta: record.FileDelta{CallID: "c1", Path: p, After: workspace.HashBytes([]byte(content)), Bytes: int64(len(content)), Content: content}}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, wt, host string)
		d     seqDelta
	}{
		{"lead's link to a host directory (E2)", func(t *testing.T, wt, host string) { must(t, os.Symlink(host, wt+"/d")) }, delta(7, "/workspace/d/x", "pwned")},
		{"relative link out", func(t *testing.T, wt, host string) {
			r, _ := filepath.Rel(wt, host)
			must(t, os.Symlink(r, wt+"/d"))
		}, delta(8, "/workspace/d/x", "pwned")},
		{"link to an existing host file's directory", func(t *testing.T, wt, host string) { must(t, os.Symlink(host, wt+"/d")) }, delta(9, "/workspace/d/secret", "pwned")},
		{"dot-dot", nil, delta(10, "/workspace/../host/x", "pwned")},
		{"dot-dot deep", nil, delta(11, "/workspace/a/../../host/x", "pwned")},
		{"absolute after the plane", nil, delta(12, "/workspace//tmp/x", "pwned")},
		{"not a plane path", nil, delta(13, "../host/x", "pwned")},
		{"deletion through a link", func(t *testing.T, wt, host string) { must(t, os.Symlink(host, wt+"/d")) },
			seqDelta{seq: 14, FileDelta: record.FileDelta{CallID: "c1", Path: "/workspace/d/secret", Before: "sha256:00"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			run, host := filepath.Join(base, "run"), filepath.Join(base, "host")
			wt := filepath.Join(run, "worktrees", "A1", "merged")
			must(t, os.MkdirAll(wt, 0o755))
			must(t, os.MkdirAll(host, 0o755))
			must(t, os.WriteFile(host+"/secret", []byte("host"), 0o644))
			if c.setup != nil {
				c.setup(t, wt, host)
			}
			err := replayDeltas(run, wt, []seqDelta{c.d})
			if err == nil {
				t.Fatal("replayed")
			}
			if want := "seq " + itoa(c.d.seq); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %s", err, want)
			}
			entries, _ := os.ReadDir(host)
			if b, _ := os.ReadFile(host + "/secret"); len(entries) != 1 || string(b) != "host" {
				t.Fatalf("host written: %v %q", entries, b)
			}
			if _, err := os.Stat(filepath.Join(base, "x")); err == nil {
				t.Fatal("wrote next to the run")
			}
		})
	}
}

func TestReplayDeltasRebuilds(t *testing.T) {
	run := t.TempDir()
	wt := filepath.Join(run, "wt")
	must(t, os.MkdirAll(wt+"/old", 0o755))
	must(t, os.WriteFile(wt+"/old/gone", []byte("x"), 0o644))
	log, err := record.Create(run, nil)
	must(t, err)
	big := strings.Repeat("z", 1000)
	ref, err := log.PutBlob([]byte(big))
	must(t, err)
	log.Close()
	ds := []seqDelta{
		{seq: 3, FileDelta: record.FileDelta{Path: "/workspace/a/b.txt", After: workspace.HashBytes([]byte("hi")), Bytes: 2, Content: "hi"}},
		{seq: 4, FileDelta: record.FileDelta{Path: "/workspace/big", After: workspace.HashBytes([]byte(big)), Bytes: 1000, ContentRef: ref}},
		{seq: 5, FileDelta: record.FileDelta{Path: "/workspace/old/gone", Before: workspace.HashBytes([]byte("x"))}},
		{seq: 6, FileDelta: record.FileDelta{Path: "/outputs/report.md", After: workspace.HashBytes([]byte("r")), Content: "r"}},
	}
	must(t, replayDeltas(run, wt, ds))
	if b, _ := os.ReadFile(wt + "/a/b.txt"); string(b) != "hi" {
		t.Fatalf("a/b.txt = %q", b)
	}
	if b, _ := os.ReadFile(wt + "/big"); string(b) != big {
		t.Fatal("big not rebuilt from its blob")
	}
	if _, err := os.Stat(wt + "/old/gone"); err == nil {
		t.Fatal("deletion not replayed")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
