package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/treecmd"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runfiles"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/world"
)

// A rollout of a code world that fixes one module, removes a file and
// adds one keeps only those in its run directory, over the stored world
// (issue 31: finishing is O(changes)). Every reader still sees the whole
// terminal tree: show names the base, workspace --to writes the tree
// (untouched files linked to the store), verify reruns the hidden tests,
// which import the untouched modules, and passes. Without the world
// stored, the readers say so instead of answering wrongly.
func TestWorldRolloutKeepsOnlyItsChanges(t *testing.T) {
	runtest.NeedSandbox(t)
	home := t.TempDir()
	id := genIDs(t, home, "code", "--seed", "1", "--level", "2")[0]
	w, err := world.NewStore(home).Get(id)
	if err != nil {
		t.Fatal(err)
	}
	fix, err := os.ReadFile(filepath.Join(w.Solution(), "workspace", "ledger", "tax.py"))
	if err != nil {
		t.Fatal(err)
	}
	script, _ := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"calls": []any{
			map[string]any{"name": "write_file", "args": map[string]any{"path": "/workspace/ledger/tax.py", "content": string(fix)}},
			map[string]any{"name": "bash", "args": map[string]any{"command": "rm /workspace/README.md && mkdir /workspace/notes && echo hi > /workspace/notes/n.txt"}},
		}},
		map[string]any{"calls": []any{map[string]any{"name": "finish", "args": map[string]any{"summary": "fixed tax"}}}},
	}})
	sp := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(sp, script, 0o644)
	if code, stdout, stderr := cli(t, "run", "--home", home, "--world", id, "--provider", "scripted", "--script", sp, "--quiet"); code != 0 {
		t.Fatalf("run --world: exit %d\n%s\n%s", code, stdout, stderr)
	}
	dir := onlyRun(t, home)
	run := filepath.Base(dir)
	var kept []string
	filepath.WalkDir(filepath.Join(dir, "workspace"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(filepath.Join(dir, "workspace"), p)
			kept = append(kept, filepath.ToSlash(rel))
		}
		return nil
	})
	if strings.Join(kept, " ") != "ledger/tax.py notes/n.txt" {
		t.Errorf("the run's workspace/ holds %v, want only the two files the rollout wrote", kept)
	}
	if b, err := runfiles.ReadBase(dir); err != nil || b == nil || b.World != id || strings.Join(b.Removed, ",") != "README.md" {
		t.Fatalf("base %+v %v, want world %s with README.md removed", b, err, id)
	}
	// The record lists what the rollout made, and counts the world's
	// files it left as they are.
	stored := 0
	for _, f := range w.Files {
		if strings.HasPrefix(f.Path, "workspace/") {
			stored++
		}
	}
	fins := decodeAll[record.RunFinished](t, runtest.Events(t, dir), record.TypeRunFinished)
	var listed []string
	for _, f := range fins[0].Files {
		listed = append(listed, f.Path)
	}
	if strings.Join(listed, " ") != "/workspace/ledger/tax.py /workspace/notes/n.txt" || fins[0].WorldFiles != stored-2 || fins[0].FilesOmitted != 0 {
		t.Errorf("run_finished lists %v and %d world files (+%d omitted), want the two files written and %d", listed, fins[0].WorldFiles, fins[0].FilesOmitted, stored-2)
	}
	if code, stdout, _ := cli(t, "show", "--home", home, run); code != 0 || !strings.Contains(stdout, "what the rollout changed; the rest is world "+id) {
		t.Errorf("show: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr := cli(t, "workspace", "--home", home, "--json", run)
	var wi treecmd.WorkspaceInfo
	if code != 0 || json.Unmarshal([]byte(stdout), &wi) != nil || wi.Whole || wi.World != id || wi.Files != 2 || strings.Join(wi.Removed, ",") != "README.md" {
		t.Errorf("workspace --json: exit %d %+v\n%s%s", code, wi, stdout, stderr)
	}
	tree := filepath.Join(t.TempDir(), "tree")
	if code, stdout, stderr := cli(t, "workspace", "--home", home, "--to", tree, run); code != 0 || !strings.Contains(stdout, "wrote ") {
		t.Fatalf("workspace --to: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, f := range w.Files {
		rel, ok := strings.CutPrefix(f.Path, "workspace/")
		if !ok {
			continue
		}
		got, err := os.Stat(filepath.Join(tree, rel))
		switch rel {
		case "README.md":
			if err == nil {
				t.Errorf("the tree holds README.md, which the rollout removed")
			}
		case "ledger/tax.py":
			if b, _ := os.ReadFile(filepath.Join(tree, rel)); string(b) != string(fix) {
				t.Errorf("the tree's tax.py is not the rollout's")
			}
		default:
			stored, _ := os.Stat(filepath.Join(w.Workspace(), rel))
			if err != nil || !os.SameFile(got, stored) {
				t.Errorf("%s is not in the tree as a link to the store (%v)", rel, err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(tree, "notes", "n.txt")); string(b) != "hi\n" {
		t.Errorf("notes/n.txt in the tree: %q", b)
	}
	if code, stdout, stderr := cli(t, "verify", "--home", home, run); code != 0 || !strings.Contains(stdout, "verification passed") {
		t.Errorf("verify of the rollout: exit %d\n%s%s", code, stdout, stderr)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".verify-workspace-*")); len(ents) != 0 {
		t.Errorf("verify left %v", ents)
	}
	if code, _, stderr := cli(t, "workspace", "--home", home, "--to", tree, run); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Errorf("workspace --to a tree already written: exit %d: %s", code, stderr)
	}
	// A base edited to name another world is not verified against it.
	good, _ := os.ReadFile(filepath.Join(dir, runfiles.BaseFile))
	os.WriteFile(filepath.Join(dir, runfiles.BaseFile), []byte(`{"world":"w-000000000000"}`), 0o644)
	if code, _, stderr := cli(t, "verify", "--home", home, run); code == 0 || !strings.Contains(stderr, "the run directory was edited") {
		t.Errorf("verify with a base naming another world: exit %d: %s", code, stderr)
	}
	os.WriteFile(filepath.Join(dir, runfiles.BaseFile), good, 0o644)
	// The world gone from the store: nothing answers as if it were there.
	os.Rename(w.Dir, w.Dir+".away")
	if code, _, stderr := cli(t, "workspace", "--home", home, "--to", filepath.Join(t.TempDir(), "t2"), run); code == 0 || !strings.Contains(stderr, "world "+id+" is not under") {
		t.Errorf("workspace --to without the world: exit %d: %s", code, stderr)
	}
	if code, _, stderr := cli(t, "verify", "--home", home, run); code == 0 || code == cmdline.ExitOK || !strings.Contains(stderr, id) {
		t.Errorf("verify without the world: exit %d: %s", code, stderr)
	}
}
