package publish

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
	"github.com/apodex/apodex/internal/workspace"
)

// fixture is one run's planes and its publication plane:
//
//	inputs/data.csv  workspace/  outputs/  staging/
type fixture struct {
	base, inputs, workspace, outputs, staging string
	plane                                     *Plane

	mu     sync.Mutex
	events []LeaseEvent
}

func newFixture(t testing.TB, quota int64, preexisting map[string]string) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{
		base:      base,
		inputs:    filepath.Join(base, "inputs"),
		workspace: filepath.Join(base, "workspace"),
		outputs:   filepath.Join(base, "outputs"),
		staging:   filepath.Join(base, "staging"),
	}
	runtest.Planes(t, base)
	put(t, filepath.Join(f.inputs, "data.csv"), "id,value\n1,2\n")
	for name, content := range preexisting {
		put(t, filepath.Join(f.outputs, name), content)
	}
	p, err := New(Config{Outputs: f.outputs, Staging: f.staging, ScratchQuota: quota})
	if err != nil {
		t.Fatal(err)
	}
	p.OnEvent = func(ev LeaseEvent) {
		f.mu.Lock()
		f.events = append(f.events, ev)
		f.mu.Unlock()
	}
	f.plane = p
	return f
}

// env is agent's tool environment: its own FS whose /outputs writes go
// through the plane, and bash with the plane's mounts.
func (f *fixture) env(agent string, runner sandbox.Runner) builtin.Env {
	fs := &workspace.FS{Inputs: f.inputs, Workspace: f.workspace, Outputs: f.outputs}
	fs.OutputsWrite = func(pp string, size int64) error { return f.plane.CheckWrite(agent, pp, size) }
	return builtin.Env{FS: fs, Runner: runner, Outputs: f.plane.BashMounts(agent)}
}

// call runs a built-in or claim_outputs as agent.
func (f *fixture) call(t *testing.T, agent string, runner sandbox.Runner, name, args string) tool.Result {
	t.Helper()
	set := tool.NewSet(append(builtin.Tools(f.env(agent, runner)), ClaimTool(f.plane, agent))...)
	tl, ok := set.Get(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	return tl.Call(context.Background(), json.RawMessage(args))
}

func (f *fixture) host(rel string) string { return filepath.Join(f.outputs, filepath.FromSlash(rel)) }

func expect(t *testing.T, r tool.Result, isErr bool, frags ...string) {
	t.Helper()
	if r.IsError != isErr {
		t.Fatalf("IsError=%v, want %v; output:\n%s", r.IsError, isErr, r.Output)
	}
	for _, s := range frags {
		if !strings.Contains(r.Output, s) {
			t.Fatalf("output does not contain %q:\n%s", s, r.Output)
		}
	}
}

func mkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func put(t testing.TB, name, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func absent(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Lstat(name); err == nil {
		t.Fatalf("%s exists", name)
	}
}

func hashOf(s string) string { return workspace.HashBytes([]byte(s)) }
