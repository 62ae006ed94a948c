package claim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/evidence"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/workspace"
)

func citeChecker(t *testing.T) *Checker {
	t.Helper()
	base := t.TempDir()
	fs := &workspace.FS{Inputs: filepath.Join(base, "in"), Workspace: filepath.Join(base, "ws"), Outputs: filepath.Join(base, "out")}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(fs.Workspace, "total.txt"), []byte("7\n"), 0o644)
	log, err := record.Create(filepath.Join(base, "run"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	q := evidence.New(log, nil)
	q.Add("main", evidence.Item{Kind: record.EvidenceSearch, Source: "/inputs/corpus/a.md", Span: record.Span{From: 3, To: 4}}, "The pier was opened in 1898.")
	log.Append(record.TypeToolCall, "A1", record.ToolCall{CallID: "call_7", Name: "bash", Arguments: `{"command":"echo 7"}`})
	log.Append(record.TypeToolResult, "A1", record.ToolResult{CallID: "call_7", Name: "bash", Output: "7\n"})
	log.Append(record.TypeToolCall, "A1", record.ToolCall{CallID: "call_8", Name: "read_file"})
	log.Sync()
	return New(Config{FS: fs, Log: log, Evidence: q}, nil)
}

func TestClaimsMustCite(t *testing.T) {
	tm := citeChecker(t)
	for _, c := range []struct {
		refs []string
		want string // "" accepted
	}{
		{[]string{"E1"}, ""},
		{[]string{"/workspace/total.txt", "bash#call_7", " E1 "}, ""},
		{[]string{"E999"}, "E999, which is not an evidence id of this run (Q holds E1 to E1)"},
		{[]string{"E0"}, "not a ref"},
		{[]string{"bash#call_8"}, "no bash call on the record"},
		{[]string{"bash#nope"}, "no bash call on the record"},
		{[]string{"/workspace/missing.txt"}, "not an existing file"},
		{[]string{"/workspace"}, "not an existing file"},
		{[]string{"/etc/passwd"}, "not an existing file"},
		{[]string{"I ran the numbers"}, "not a ref"},
	} {
		err := tm.CheckRefs(tm.cfg.FS, "claim 1", c.refs)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v refused: %v", c.refs, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "a ref is an evidence id")):
			t.Errorf("%v: %v, want %q and the list of valid kinds", c.refs, err, c.want)
		}
	}
}

func TestReportRefusesUnknownEvidence(t *testing.T) {
	tm := citeChecker(t)
	box := &ReportBox{}
	rt := NewReportTool(box, nil, tm.ClaimRefs(tm.cfg.FS))
	args, _ := json.Marshal(map[string]any{"summary": "done", "claims": []map[string]any{
		{"text": "the pier opened in 1898", "evidence": []string{"E1"}},
		{"text": "it cost a fortune", "evidence": []string{"E999"}}}})
	r := rt.Call(context.Background(), args)
	if !r.IsError || !strings.Contains(r.Output, "claim 2 cites E999") || box.Get() != nil || r.Finish != nil {
		t.Fatalf("a report citing E999 was accepted: %+v", r)
	}
	args, _ = json.Marshal(map[string]any{"summary": "done", "claims": []map[string]any{{"text": "the pier opened in 1898", "evidence": []string{"E1", "bash#call_7"}}}})
	if r := rt.Call(context.Background(), args); r.IsError || box.Get() == nil {
		t.Fatalf("a well-cited report was refused: %s", r.Output)
	}
}

func TestVerifyExpandsRefs(t *testing.T) {
	tm := citeChecker(t)
	if got := tm.ExpandRef("E1"); !strings.Contains(got, "The pier was opened in 1898.") || !strings.Contains(got, "/inputs/corpus/a.md lines 3-4") {
		t.Errorf("E1 expanded to %q", got)
	}
	if got := tm.ExpandRef("bash#call_7"); !strings.Contains(got, `{"command":"echo 7"}`) || !strings.Contains(got, "output:\n7") {
		t.Errorf("bash#call_7 expanded to %q", got)
	}
	if got := tm.ExpandRef("/workspace/total.txt"); got != "7\n" {
		t.Errorf("file expanded to %q", got)
	}
	if err := tm.CheckRefs(tm.cfg.FS, "verify", []string{"trust me"}); err == nil || !strings.Contains(err.Error(), "not a ref") {
		t.Errorf("verify took free text as evidence: %v", err)
	}
}
