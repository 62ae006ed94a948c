package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

func TestReadFile(t *testing.T) {
	env := testEnv(t)
	ws := env.FS.Workspace
	var many strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	put(t, filepath.Join(ws, "many.txt"), many.String())
	put(t, filepath.Join(ws, "long.txt"), "short\n"+strings.Repeat("x", 5000)+"\n")
	put(t, filepath.Join(ws, "bin.dat"), "PK\x03\x04\x00\x00binary")
	put(t, filepath.Join(ws, "empty.txt"), "")
	put(t, filepath.Join(ws, "crlf.txt"), "one\r\ntwo")
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		isErr      bool
		frags      []string
	}{
		{"relative", `{"path": "notes.txt"}`, false, []string{"     1\tfirst\n     2\tsecond\n     3\tthird\n", "[/workspace/notes.txt: lines 1-3 of 3]"}},
		{"inputs", `{"path": "/inputs/data.csv"}`, false, []string{"     2\t1,ada"}},
		{"offset limit", `{"path": "notes.txt", "offset": 2, "limit": 1}`, false, []string{"     2\tsecond\n[", "lines 2-2 of 3; to read more, call read_file with offset=3"}},
		{"offset zero", `{"path": "notes.txt", "offset": 0}`, false, []string{"     1\tfirst"}},
		{"default limit", `{"path": "many.txt"}`, false, []string{"lines 1-", "of 2500", "offset="}},
		{"limit", `{"path": "many.txt", "offset": 2400, "limit": 50}`, false, []string{"  2400\tline 2400\n", "  2449\tline 2449\n[/workspace/many.txt: lines 2400-2449 of 2500; to read more, call read_file with offset=2450]"}},
		{"long line", `{"path": "long.txt"}`, false, []string{"[line cut: 5000 bytes]", "1 long line cut at 2000 bytes"}},
		{"crlf", `{"path": "crlf.txt"}`, false, []string{"     1\tone\n     2\ttwo\n"}},
		{"empty", `{"path": "empty.txt"}`, false, []string{"[/workspace/empty.txt is empty]"}},
		{"past end", `{"path": "notes.txt", "offset": 10}`, true, []string{"offset 10 is past the end of /workspace/notes.txt, which has 3 lines"}},
		{"negative", `{"path": "notes.txt", "limit": -1}`, true, []string{"must be positive"}},
		{"directory", `{"path": "/inputs"}`, true, []string{"/inputs is a directory; use list_files"}},
		{"binary", `{"path": "bin.dat"}`, true, []string{"/workspace/bin.dat is a binary file", "bash"}},
		{"missing", `{"path": "nope.txt"}`, true, []string{"no such file or directory: /workspace/nope.txt; use list_files"}},
		{"escape", `{"path": "../../etc/passwd"}`, true, []string{"climbs out"}},
		{"absolute outside", `{"path": "/etc/passwd"}`, true, []string{"outside the planes"}},
		{"symlink out", `{"path": "passwd"}`, true, []string{"symbolic link to /etc/passwd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, call(t, env, "read_file", tt.args), tt.isErr, tt.frags...)
		})
	}
}

// A read stops at the observation limit on a line boundary and says where to
// continue, instead of losing the middle to a cut.
func TestReadFileOutputLimit(t *testing.T) {
	env := testEnv(t)
	env.ObservationLimit = 1024
	var b strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&b, "some text on line %d\n", i)
	}
	put(t, filepath.Join(env.FS.Workspace, "f.txt"), b.String())
	r := call(t, env, "read_file", `{"path": "f.txt"}`)
	expect(t, r, false, "of 200; output limit reached; to read more, call read_file with offset=")
	if r.Full != nil || len(r.Output) > 1024 {
		t.Fatalf("output %d bytes, Full %v", len(r.Output), r.Full != nil)
	}
}

func TestWriteFile(t *testing.T) {
	env := testEnv(t)
	r := call(t, env, "write_file", `{"path": "a/b/new.txt", "content": "hello\nworld\n"}`)
	expect(t, r, false, "created /workspace/a/b/new.txt (12 B, 2 lines)")
	host := filepath.Join(env.FS.Workspace, "a", "b", "new.txt")
	if got, _ := os.ReadFile(host); string(got) != "hello\nworld\n" {
		t.Fatalf("file holds %q", got)
	}
	wantDelta := tool.FileDelta{Path: "/workspace/a/b/new.txt", After: workspace.HashBytes([]byte("hello\nworld\n")), Bytes: 12}
	if len(r.Deltas) != 1 || r.Deltas[0] != wantDelta {
		t.Fatalf("deltas %+v", r.Deltas)
	}

	r = call(t, env, "write_file", `{"path": "/workspace/notes.txt", "content": ""}`)
	expect(t, r, false, "replaced /workspace/notes.txt (0 B, 0 lines)")
	if d := r.Deltas[0]; d.Before != workspace.HashBytes([]byte("first\nsecond\nthird\n")) || d.After != workspace.HashBytes(nil) {
		t.Fatalf("delta %+v", d)
	}
	expect(t, call(t, env, "write_file", `{"path": "notes.txt", "content": ""}`), false, "content unchanged")

	if err := os.Symlink(env.FS.Inputs, filepath.Join(env.FS.Workspace, "in")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, frag string }{
		{"/inputs/data.csv", "/inputs is read-only"},
		{"/outputs/report.md", "/outputs is read-only in this run"},
		{"in/data.csv", "outside /workspace"},
		{"../../../etc/x", "climbs out"},
		{"a/b", "is a directory"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			r := call(t, env, "write_file", fmt.Sprintf(`{"path": %q, "content": "x"}`, tt.path))
			expect(t, r, true, tt.frag)
			if len(r.Deltas) != 0 {
				t.Fatal("refused write has deltas")
			}
		})
	}
	if got, _ := os.ReadFile(filepath.Join(env.FS.Inputs, "data.csv")); string(got) != "id,name\n1,ada\n2,bob\n" {
		t.Fatal("/inputs changed")
	}
}

func TestEditFile(t *testing.T) {
	env := testEnv(t)
	host := filepath.Join(env.FS.Workspace, "code.py")
	orig := "def f():\n    return 1\n\ndef g():\n    return 1\n"
	put(t, host, orig)
	tests := []struct {
		name, args string
		isErr      bool
		frags      []string
	}{
		{"not found", `{"path": "code.py", "old_text": "return 2", "new_text": "x"}`, true, []string{"old_text was not found in /workspace/code.py; nothing was changed"}},
		{"whitespace", `{"path": "code.py", "old_text": "def g():\n  return 1", "new_text": "x"}`, true, []string{"not found", "matches near line 4 if whitespace is ignored"}},
		{"ambiguous", `{"path": "code.py", "old_text": "return 1", "new_text": "return 2"}`, true, []string{"old_text occurs 2 times in /workspace/code.py (lines 2, 5)", "more surrounding lines"}},
		{"empty old", `{"path": "code.py", "old_text": "", "new_text": "x"}`, true, []string{"old_text is empty", "write_file"}},
		{"same", `{"path": "code.py", "old_text": "f", "new_text": "f"}`, true, []string{"the same"}},
		{"missing file", `{"path": "nope.py", "old_text": "a", "new_text": "b"}`, true, []string{"no such file: /workspace/nope.py; use write_file"}},
		{"inputs", `{"path": "/inputs/data.csv", "old_text": "ada", "new_text": "eve"}`, true, []string{"/inputs is read-only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, call(t, env, "edit_file", tt.args), tt.isErr, tt.frags...)
			if got, _ := os.ReadFile(host); string(got) != orig {
				t.Fatalf("file changed to %q", got)
			}
		})
	}
	r := call(t, env, "edit_file", `{"path": "code.py", "old_text": "def g():\n    return 1", "new_text": "def g():\n    x = 2\n    return x"}`)
	expect(t, r, false, "edited /workspace/code.py at line 4: replaced 2 lines with 3 lines")
	want := "def f():\n    return 1\n\ndef g():\n    x = 2\n    return x\n"
	if got, _ := os.ReadFile(host); string(got) != want {
		t.Fatalf("file is %q", got)
	}
	// old_text ending in a newline counts its lines, not one more.
	r2 := call(t, env, "edit_file", `{"path": "code.py", "old_text": "    x = 2\n", "new_text": "    x = 2\n    y = 3\n"}`)
	expect(t, r2, false, "replaced 1 line with 2 lines")
	r2 = call(t, env, "edit_file", `{"path": "code.py", "old_text": "    y = 3\n", "new_text": ""}`)
	expect(t, r2, false, "replaced 1 line with 0 lines")
	wantDelta := tool.FileDelta{Path: "/workspace/code.py", Before: workspace.HashBytes([]byte(orig)), After: workspace.HashBytes([]byte(want)), Bytes: int64(len(want))}
	if len(r.Deltas) != 1 || r.Deltas[0] != wantDelta {
		t.Fatalf("deltas %+v", r.Deltas)
	}
}

// Without a publishing plane no text names claim_outputs, which the agent
// would not have; with one, the file tools and bash explain it.
func TestClaimOutputsNamedOnlyWhenWired(t *testing.T) {
	env := testEnv(t)
	for _, spec := range tool.NewSet(Tools(env)...).Specs() {
		if strings.Contains(string(spec.Parameters)+spec.Description, "claim_outputs") {
			t.Errorf("%s names claim_outputs without a publishing plane", spec.Name)
		}
	}
	for _, r := range []tool.Result{
		call(t, env, "write_file", `{"path": "/outputs/a", "content": "x"}`),
		call(t, env, "list_files", `{"path": "/"}`),
	} {
		if strings.Contains(r.Output, "claim_outputs") {
			t.Errorf("output names claim_outputs: %s", r.Output)
		}
	}
	env.FS.OutputsWrite = func(string, int64) error { return nil }
	set := tool.NewSet(Tools(env)...)
	for _, name := range []string{"write_file"} {
		tl, _ := set.Get(name)
		if !strings.Contains(tl.Spec().Description, "claim_outputs") {
			t.Errorf("%s does not explain claim_outputs", name)
		}
	}
	expect(t, call(t, env, "list_files", `{"path": "/"}`), false, "claim_outputs", "/outputs/scratch/")
}
