package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// testEnv builds an Env over fresh planes:
//
//	/inputs/data.csv  /workspace/notes.txt  /outputs/
func testEnv(t *testing.T) Env {
	t.Helper()
	base := t.TempDir()
	fs := &workspace.FS{
		Inputs:    filepath.Join(base, "inputs"),
		Workspace: filepath.Join(base, "workspace"),
		Outputs:   filepath.Join(base, "outputs"),
	}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	put(t, filepath.Join(fs.Inputs, "data.csv"), "id,name\n1,ada\n2,bob\n")
	put(t, filepath.Join(fs.Workspace, "notes.txt"), "first\nsecond\nthird\n")
	return Env{FS: fs}
}

func put(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// call runs the named built-in with JSON arguments.
func call(t *testing.T, env Env, name, args string) tool.Result {
	t.Helper()
	tl, ok := tool.NewSet(Tools(env)...).Get(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	r := tl.Call(context.Background(), json.RawMessage(args))
	if r.IsError != strings.HasPrefix(r.Output, "error: ") {
		t.Fatalf("IsError=%v but output %q", r.IsError, r.Output)
	}
	return r
}

// expect checks that the output contains every fragment, and the error flag.
func expect(t *testing.T, r tool.Result, isErr bool, frags ...string) {
	t.Helper()
	if r.IsError != isErr {
		t.Fatalf("IsError=%v, want %v; output:\n%s", r.IsError, isErr, r.Output)
	}
	for _, f := range frags {
		if !strings.Contains(r.Output, f) {
			t.Fatalf("output does not contain %q:\n%s", f, r.Output)
		}
	}
}

func TestSpecs(t *testing.T) {
	want := map[string][]string{ // SPEC §4: names and arguments are a contract
		"read_file":  {"path", "offset", "limit"},
		"write_file": {"path", "content"},
		"edit_file":  {"path", "old_text", "new_text"},
		"list_files": {"path", "pattern"},
		"grep":       {"pattern", "path"},
		"bash":       {"command", "timeout_s"},
	}
	required := map[string][]string{
		"read_file": {"path"}, "write_file": {"path", "content"}, "edit_file": {"path", "old_text", "new_text"},
		"list_files": {"path"}, "grep": {"pattern"}, "bash": {"command"},
	}
	env := testEnv(t)
	env.Runner = &fakeRunner{}
	set := tool.NewSet(Tools(env)...)
	if got := set.Names(); len(got) != len(want) {
		t.Fatalf("tools %v", got)
	}
	for _, spec := range set.Specs() {
		t.Run(spec.Name, func(t *testing.T) {
			var s struct {
				Type       string                    `json:"type"`
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
				Additional *bool                     `json:"additionalProperties"`
			}
			if err := json.Unmarshal(spec.Parameters, &s); err != nil {
				t.Fatal(err)
			}
			if s.Type != "object" || s.Additional == nil || *s.Additional {
				t.Fatalf("schema %s", spec.Parameters)
			}
			if len(spec.Description) < 40 {
				t.Fatalf("description too thin: %q", spec.Description)
			}
			var names []string
			for n, p := range s.Properties {
				names = append(names, n)
				if p["type"] == nil || p["description"] == nil {
					t.Errorf("property %s lacks type or description: %v", n, p)
				}
			}
			slices.Sort(names)
			w := slices.Clone(want[spec.Name])
			slices.Sort(w)
			if !slices.Equal(names, w) {
				t.Errorf("arguments %v, want %v", names, w)
			}
			if !slices.Equal(s.Required, required[spec.Name]) {
				t.Errorf("required %v, want %v", s.Required, required[spec.Name])
			}
		})
	}
}

func TestArgs(t *testing.T) {
	env := testEnv(t)
	env.Runner = &fakeRunner{} // bash is offered
	tests := []struct {
		name, tool, args string
		frags            []string
	}{
		{"malformed", "read_file", `{"path": "a"`, []string{"must be a JSON object", "unexpected end of JSON input", `expected {"path": "...", "offset": 1, "limit": 1}`}},
		{"not json", "read_file", `path=a`, []string{"must be a JSON object", "invalid character"}},
		{"array", "read_file", `["a"]`, []string{"got an array"}},
		{"unknown", "read_file", `{"path": "a", "file": "b", "lines": 3}`, []string{`unknown argument "file", "lines" for read_file`, "accepted: path, offset (optional), limit (optional)"}},
		{"missing", "edit_file", `{"path": "a"}`, []string{`missing required argument "old_text", "new_text" for edit_file`}},
		{"null required", "write_file", `{"path": null, "content": ""}`, []string{`missing required argument "path"`}},
		{"empty args", "bash", ``, []string{`missing required argument "command"`}},
		{"wrong type", "read_file", `{"path": "a", "offset": "5"}`, []string{`argument "offset" of read_file must be an integer, got "5"`}},
		{"wrong type string", "grep", `{"pattern": 42}`, []string{`argument "pattern" of grep must be a string, got 42`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, call(t, env, tt.tool, tt.args), true, tt.frags...)
		})
	}
	// null for an optional argument is its default
	expect(t, call(t, env, "read_file", `{"path": "notes.txt", "offset": null}`), false, "     1\tfirst")
}
