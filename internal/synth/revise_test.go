package synth

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/claims"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
	"github.com/apodex/apodex/internal/workspace"
)

func ledgerOf(cs ...claims.Claim) *claims.Ledger { return &claims.Ledger{Claims: cs} }

// Only statements that cite verified claims alone are kept: not one
// citing a refuted, disputed, unresolved or withdrawn claim beside a
// verified one, not one citing evidence only; the text after a kept
// statement's citation is free.
func TestKeptLines(t *testing.T) {
	l := ledgerOf(
		claims.Claim{ID: "K1", Status: claims.Corroborated, Settled: true},
		claims.Claim{ID: "K2", Status: claims.Refuted, Settled: true},
		claims.Claim{ID: "K3", Status: claims.Corroborated}, // supported on other evidence: not settled
		claims.Claim{ID: "K4", Status: claims.Corroborated, Settled: true, Withdrawn: "by the lead"},
		claims.Claim{ID: "K5", Status: claims.Corroborated, Settled: true},
	)
	report := "# R\nA [K1]. Draft 1.\nB [K1, K2].\nC [K3].\nD [K4].\nE [E7].\nF [K1][K5] and [E2].\n"
	got := keptLines(l, map[string]string{"/outputs/r.md": report})["/outputs/r.md"]
	var lines []int
	for _, k := range got {
		lines = append(lines, k.line)
	}
	if len(lines) != 2 || lines[0] != 2 || lines[1] != 7 || got[0].text != "A [K1]" || got[1].text != "F [K1][K5] and [E2]" {
		t.Fatalf("kept %+v; want \"A [K1]\" of line 2 and \"F [K1][K5] and [E2]\" of line 7", got)
	}
	if d := dropped(got, "# R\n  A   [K1].\n\nF [K1][K5]\nand [E2]. more\n"); len(d) != 0 {
		t.Errorf("a reflowed revision that keeps the words dropped %v", d)
	}
	if d := dropped(got, "# R\nA [K1]. Draft 2.\nF [K1] and [E2].\n"); len(d) != 1 || d[0].line != 7 {
		t.Errorf("dropping K5's citation: dropped %v; want line 7", d)
	}
}

// The guard refuses a write_file or edit_file that would drop a kept line
// (of a report under /workspace here; /outputs takes a lease)
// before anything changes, and lets every other write through.
func TestKeepGuard(t *testing.T) {
	base := t.TempDir()
	fs := &workspace.FS{Inputs: filepath.Join(base, "in"), Workspace: filepath.Join(base, "ws"), Outputs: filepath.Join(base, "out")}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		os.MkdirAll(d, 0o755)
	}
	const text = "# R\nA [K1].\nDraft.\n"
	os.WriteFile(filepath.Join(fs.Workspace, "r.md"), []byte(text), 0o644)
	set := tool.NewSet(builtin.Tools(builtin.Env{FS: fs})...)
	var tools []tool.Tool
	for _, n := range []string{"write_file", "edit_file"} {
		tl, _ := set.Get(n)
		tools = append(tools, tl)
	}
	kept := keptLines(ledgerOf(claims.Claim{ID: "K1", Status: claims.Corroborated, Settled: true}), map[string]string{"/workspace/r.md": text})
	tools = guardRevisions(tools, fs, kept)
	call := func(i int, args map[string]string) tool.Result {
		raw, _ := json.Marshal(args)
		return tools[i].Call(context.Background(), raw)
	}
	for _, c := range []struct {
		i    int
		args map[string]string
	}{
		{0, map[string]string{"path": "/workspace/r.md", "content": "# New\n"}},
		{1, map[string]string{"path": "/workspace/r.md", "old_text": "A [K1].", "new_text": "A, roughly [K1]."}},
		{1, map[string]string{"path": "/workspace/r.md", "old_text": "[K1]", "new_text": "[E1]"}},
	} {
		if r := call(c.i, c.args); !r.IsError || !strings.Contains(r.Output, "line 2 (K1): A [K1]") {
			t.Errorf("%v was not refused: %s", c.args, r.Output)
		}
		if got, _ := os.ReadFile(filepath.Join(fs.Workspace, "r.md")); string(got) != text {
			t.Fatalf("a refused write changed the report: %q", got)
		}
	}
	if r := call(1, map[string]string{"path": "/workspace/r.md", "old_text": "Draft.", "new_text": "Checked [K1]."}); r.IsError {
		t.Fatalf("an edit around the kept line was refused: %s", r.Output)
	}
	if r := call(0, map[string]string{"path": "/workspace/other.md", "content": "anything"}); r.IsError {
		t.Fatalf("a write to another file was refused: %s", r.Output)
	}
}
