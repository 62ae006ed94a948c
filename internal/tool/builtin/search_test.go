package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListFiles(t *testing.T) {
	env := testEnv(t)
	ws := env.FS.Workspace
	put(t, filepath.Join(ws, "src", "main.go"), "package main\n")
	put(t, filepath.Join(ws, "src", "util", "x_test.go"), "package util\n")
	put(t, filepath.Join(ws, ".git", "HEAD"), "ref\n")
	if err := os.Symlink("main.go", filepath.Join(ws, "src", "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		isErr      bool
		frags      []string
		absent     []string
	}{
		{"workspace", `{"path": "/workspace"}`, false,
			[]string{"/workspace/\n", ".git/  (not entered", "notes.txt  19 B\n", "src/\n", "src/main.go  13 B\n", "src/link -> main.go\n", "src/util/\n", "src/util/x_test.go  13 B\n", "[7 entries]"},
			[]string{".git/HEAD"}},
		{"relative dir", `{"path": "src"}`, false, []string{"/workspace/src/\n", "main.go  13 B\n", "util/x_test.go"}, []string{"notes.txt"}},
		{"base pattern", `{"path": ".", "pattern": "*.go"}`, false, []string{"src/main.go", "src/util/x_test.go", "[2 entries]"}, []string{"notes.txt"}},
		{"path pattern", `{"path": ".", "pattern": "src/*.go"}`, false, []string{"src/main.go", "[1 entry]"}, []string{"x_test.go"}},
		{"doublestar", `{"path": ".", "pattern": "src/**/*_test.go"}`, false, []string{"src/util/x_test.go", "[1 entry]"}, nil},
		{"no match", `{"path": ".", "pattern": "*.rs"}`, false, []string{`[no entries match "*.rs"]`}, nil},
		{"entered by path", `{"path": ".git"}`, false, []string{"HEAD  4 B"}, nil},
		{"outputs empty", `{"path": "/outputs"}`, false, []string{"[empty directory]"}, nil},
		{"root", `{"path": "/"}`, false, []string{"/inputs/", "/workspace/", "/outputs/"}, nil},
		{"file", `{"path": "notes.txt"}`, false, []string{"is a file (19 B); use read_file"}, nil},
		{"missing", `{"path": "nope"}`, true, []string{"no such file or directory: /workspace/nope"}, nil},
		{"bad pattern", `{"path": ".", "pattern": "[a"}`, true, []string{"bad glob pattern"}, nil},
		{"outside", `{"path": "/etc"}`, true, []string{"outside the planes"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "list_files", tt.args)
			expect(t, r, tt.isErr, tt.frags...)
			for _, a := range tt.absent {
				if strings.Contains(r.Output, a) {
					t.Fatalf("output contains %q:\n%s", a, r.Output)
				}
			}
		})
	}
}

func TestListFilesCap(t *testing.T) {
	env := testEnv(t)
	for i := range 1100 {
		put(t, filepath.Join(env.FS.Workspace, "many", fmt.Sprintf("f%04d", i)), "")
	}
	r := call(t, env, "list_files", `{"path": "many"}`)
	expect(t, r, false, "f0999", "[stopped at 1000 entries; list a subdirectory or give a pattern")
	if strings.Contains(r.Output, "f1000") {
		t.Fatal("listed past the cap")
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, rel string
		want         bool
	}{
		{"*.go", "a/b/c.go", true},
		{"*.go", "c.py", false},
		{"a/*.go", "a/c.go", true},
		{"a/*.go", "a/b/c.go", false},
		{"**/*.go", "c.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"a/**", "a/b/c", true},
		{"a/**/c", "a/c", true},
		{"a/**/c", "a/x/y/c", true},
		{"a/**/c", "b/x/c", false},
		{strings.Repeat("**/", 30) + "z", strings.Repeat("a/", 40) + "y", false},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.rel); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v", tt.pattern, tt.rel, got)
		}
	}
}

func TestGrep(t *testing.T) {
	env := testEnv(t)
	ws := env.FS.Workspace
	put(t, filepath.Join(ws, "src", "a.go"), "package a\n\nfunc Alpha() {}\nfunc beta() {}\n")
	put(t, filepath.Join(ws, "blob.bin"), "func \x00 binary")
	put(t, filepath.Join(ws, "node_modules", "m.js"), "func hidden\n")
	put(t, filepath.Join(env.FS.Outputs, "r.md"), "uses Alpha\n")
	put(t, filepath.Join(ws, "long.txt"), strings.Repeat("x", 1000)+"NEEDLE"+strings.Repeat("y", 1000)+"\n")
	tests := []struct {
		name, args string
		isErr      bool
		frags      []string
		absent     []string
	}{
		{"all planes", `{"pattern": "Alpha"}`, false, []string{"/workspace/src/a.go:3: func Alpha() {}\n", "/outputs/r.md:1: uses Alpha\n", "[2 matches in 2 files; 1 binary file skipped]"}, nil},
		{"inputs", `{"pattern": "^\\d+,", "path": "/inputs"}`, false, []string{"/inputs/data.csv:2: 1,ada", "/inputs/data.csv:3: 2,bob"}, nil},
		{"one file", `{"pattern": "(?i)ALPHA|beta", "path": "src/a.go"}`, false, []string{"/workspace/src/a.go:3:", "/workspace/src/a.go:4: func beta() {}"}, nil},
		{"skips", `{"pattern": "func", "path": "/workspace"}`, false, []string{"[2 matches in 1 file; 1 binary file skipped]"}, []string{"hidden", "blob.bin:"}},
		{"long line", `{"pattern": "NEEDLE", "path": "long.txt"}`, false, []string{"…xxx", "NEEDLEyyy", "y…\n"}, nil},
		{"none", `{"pattern": "zzz"}`, false, []string{`[no matches for "zzz" in /inputs, /workspace and /outputs;`}, nil},
		{"bad regexp", `{"pattern": "func("}`, true, []string{`bad regular expression "func("`, "missing closing )"}, nil},
		{"missing path", `{"pattern": "x", "path": "nope"}`, true, []string{"no such file or directory: /workspace/nope"}, nil},
		{"outside", `{"pattern": "root", "path": "/etc"}`, true, []string{"outside the planes"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "grep", tt.args)
			expect(t, r, tt.isErr, tt.frags...)
			for _, a := range tt.absent {
				if strings.Contains(r.Output, a) {
					t.Fatalf("output contains %q:\n%s", a, r.Output)
				}
			}
		})
	}
}

func TestGrepCap(t *testing.T) {
	env := testEnv(t)
	put(t, filepath.Join(env.FS.Workspace, "big.txt"), strings.Repeat("hit\n", 600))
	r := call(t, env, "grep", `{"pattern": "hit", "path": "big.txt"}`)
	expect(t, r, false, "/workspace/big.txt:500: hit\n[stopped at 500 matches")
	if strings.Contains(r.Output, ":501:") {
		t.Fatal("grep went past the cap")
	}
}
