package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// fakeRunner records the spec and answers with run.
type fakeRunner struct {
	spec sandbox.Spec
	run  func(sandbox.Spec) (sandbox.Result, error)
}

func (f *fakeRunner) Run(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	f.spec = spec
	return f.run(spec)
}

var _ sandbox.Runner = (*fakeRunner)(nil)

func TestBashFake(t *testing.T) {
	env := testEnv(t)
	ws := env.FS.Workspace
	fake := &fakeRunner{}
	env.Runner = fake

	// The command writes a file and changes another, as a real one would.
	fake.run = func(sandbox.Spec) (sandbox.Result, error) {
		put(t, filepath.Join(ws, "out", "made.txt"), "made\n")
		put(t, filepath.Join(ws, "notes.txt"), "changed\n")
		return sandbox.Result{ExitCode: 0, Stdout: []byte("hello\n"), StdoutBytes: 6, Duration: 42 * time.Millisecond}, nil
	}
	r := call(t, env, "bash", `{"command": "echo hello > /dev/stdout"}`)
	expect(t, r, false, "exit code: 0\n--- stdout ---\nhello\n--- stderr: empty ---")
	want := []tool.FileDelta{
		{Path: "/workspace/notes.txt", Before: workspace.HashBytes([]byte("first\nsecond\nthird\n")), After: workspace.HashBytes([]byte("changed\n")), Bytes: 8},
		{Path: "/workspace/out/made.txt", After: workspace.HashBytes([]byte("made\n")), Bytes: 5},
	}
	for i := range r.Deltas {
		r.Deltas[i].MTime = time.Time{}
	}
	if len(r.Deltas) != 2 || r.Deltas[0] != want[0] || r.Deltas[1] != want[1] {
		t.Fatalf("deltas %+v", r.Deltas)
	}
	if m := r.Meta; m == nil || m.ExitCode == nil || *m.ExitCode != 0 || m.DurationMS != 42 || m.TimedOut || m.StdoutBytes != 6 {
		t.Fatalf("meta %v", r.Meta)
	}
	s := fake.spec
	if s.Dir != "/workspace" || s.Timeout != DefaultBashTimeout || s.OutputLimit != 8<<20 || s.Network || len(s.Mounts) != 3 || s.Command != "echo hello > /dev/stdout" {
		t.Fatalf("spec %+v", s)
	}

	// A timeout is stated; a timeout above the maximum is clamped.
	fake.run = func(sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: -1, TimedOut: true, Stderr: []byte("partial"), StderrBytes: 20 << 20}, nil
	}
	r = call(t, env, "bash", `{"command": "sleep 9999", "timeout_s": 99999}`)
	expect(t, r, false, "timeout_s 99999 is above the maximum; used 3600s", "exit code: -1\ntimed out after 3600s, process group killed", "--- stderr (first 7 B of 20.0 MiB; redirect to a file to keep it all) ---\npartial")
	if fake.spec.Timeout != MaxBashTimeout || r.Meta == nil || !r.Meta.TimedOut || len(r.Deltas) != 0 {
		t.Fatalf("timeout %v meta %v deltas %v", fake.spec.Timeout, r.Meta, r.Deltas)
	}
	call(t, env, "bash", `{"command": "true", "timeout_s": 5}`)
	if fake.spec.Timeout != 5*time.Second {
		t.Fatalf("timeout %v", fake.spec.Timeout)
	}

	// A non-zero exit is an observation, not a tool error.
	fake.run = func(sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: 2, Stderr: []byte("ls: nope: No such file"), StderrBytes: 22}, nil
	}
	expect(t, call(t, env, "bash", `{"command": "ls nope"}`), false, "exit code: 2\n--- stdout: empty ---\n--- stderr ---\nls: nope: No such file")

	fake.run = func(sandbox.Spec) (sandbox.Result, error) { return sandbox.Result{}, errors.New("fork failed") }
	expect(t, call(t, env, "bash", `{"command": "true"}`), true, "could not run the command: fork failed")
	expect(t, call(t, env, "bash", `{"command": "  "}`), true, "command is empty")
	expect(t, call(t, env, "bash", `{"command": "true", "timeout_s": -1}`), true, "timeout_s must be positive")

	// Huge output reaches the model cut, and the record whole.
	big := strings.Repeat("z", 5<<20)
	fake.run = func(sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{Stdout: []byte(big), StdoutBytes: int64(len(big))}, nil
	}
	r = call(t, env, "bash", `{"command": "yes z"}`)
	if len(r.Output) > tool.DefaultObservationLimit+200 || !strings.Contains(string(r.Full), big) || !strings.Contains(r.Output, "bytes cut of") {
		t.Fatalf("output %d bytes, full %d bytes", len(r.Output), len(r.Full))
	}
}

// Without a sandbox bash is not offered (every call would be refused), and
// a call that reaches it anyway is refused saying why.
func TestBashNoRunner(t *testing.T) {
	env := testEnv(t)
	if _, ok := tool.NewSet(Tools(env)...).Get("bash"); ok {
		t.Error("bash is offered without a sandbox")
	}
	r := bash(context.Background(), env.withDefaults(), bashArgs{Command: "true"})
	expect(t, r, true, sandbox.ErrUnavailable.Error())
}

func TestBashNetworkFlag(t *testing.T) {
	env := testEnv(t)
	fake := &fakeRunner{run: func(sandbox.Spec) (sandbox.Result, error) { return sandbox.Result{}, nil }}
	env.Runner, env.Network = fake, true
	call(t, env, "bash", `{"command": "true"}`)
	if !fake.spec.Network {
		t.Fatal("network not passed on")
	}
}

// TestBashBwrap runs the real sandbox where bubblewrap works here.
func TestBashBwrap(t *testing.T) {
	runner, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		t.Skipf("no sandbox: %v", err)
	}
	env := testEnv(t)
	env.Runner = runner
	r := call(t, env, "bash", `{"command": "pwd; cat /inputs/data.csv | wc -l; echo made > new.txt; echo oops > /inputs/x; echo err >&2; exit 3"}`)
	expect(t, r, false, "exit code: 3\n--- stdout ---\n/workspace\n3\n--- stderr ---\n", "Read-only file system\nerr")
	if len(r.Deltas) != 1 || r.Deltas[0].Path != "/workspace/new.txt" || r.Deltas[0].After != workspace.HashBytes([]byte("made\n")) {
		t.Fatalf("deltas %+v", r.Deltas)
	}
	if _, err := os.Stat(filepath.Join(env.FS.Inputs, "x")); err == nil {
		t.Fatal("the command wrote to /inputs")
	}
	r = call(t, env, "bash", `{"command": "sleep 30", "timeout_s": 1}`)
	expect(t, r, false, "timed out after 1s, process group killed")
}

func TestBashOutputsHook(t *testing.T) {
	env := testEnv(t)
	fake := &fakeRunner{}
	env.Runner = fake
	var kills []bool
	hookErr := error(nil)
	env.Outputs = func(context.Context) (OutputsView, error) {
		return OutputsView{
			Mounts: []sandbox.Mount{{Source: "/staging", Target: "/outputs", Writable: true}, {Source: "/scratch", Target: "/outputs/scratch", Writable: true}},
			Hint:   "claim the lease first",
			After: func(killed bool) string {
				kills = append(kills, killed)
				return "--- /outputs ---\nkept /outputs/a"
			},
		}, hookErr
	}
	fake.run = func(spec sandbox.Spec) (sandbox.Result, error) {
		// The command changes a file under /outputs (as a commit would).
		put(t, filepath.Join(env.FS.Outputs, "a"), "a\n")
		return sandbox.Result{Stderr: []byte("sh: cannot create /outputs/b: Read-only file system\n"), StderrBytes: 52, ExitCode: 2}, nil
	}
	r := call(t, env, "bash", `{"command": "echo a > /outputs/a"}`)
	expect(t, r, false, "exit code: 2", "Read-only file system\n--- /outputs ---\nkept /outputs/a\nnote: claim the lease first")
	if len(kills) != 1 || kills[0] {
		t.Fatalf("After calls %v", kills)
	}
	var targets []string
	for _, m := range fake.spec.Mounts {
		targets = append(targets, m.Target)
		if m.Target == "/outputs" && m.Source != "/staging" {
			t.Fatalf("the FS's /outputs mount was kept: %+v", m)
		}
	}
	if strings.Join(targets, ",") != "/inputs,/workspace,/outputs,/outputs/scratch" {
		t.Fatalf("mounts %v", targets)
	}
	if len(r.Deltas) != 1 || r.Deltas[0].Path != "/outputs/a" {
		t.Fatalf("deltas %+v", r.Deltas)
	}
	if !strings.Contains(tool.NewSet(Tools(env)...).Specs()[0].Description, "claim_outputs") {
		t.Fatal("bash description does not mention the lease")
	}

	// No hint without a read-only error; a killed command is told so.
	fake.run = func(sandbox.Spec) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: -1, TimedOut: true}, nil
	}
	r = call(t, env, "bash", `{"command": "sleep 99", "timeout_s": 1}`)
	if strings.Contains(r.Output, "claim the lease") || len(kills) != 2 || !kills[1] {
		t.Fatalf("kills %v output:\n%s", kills, r.Output)
	}
	fake.run = func(sandbox.Spec) (sandbox.Result, error) { return sandbox.Result{}, errors.New("fork failed") }
	expect(t, call(t, env, "bash", `{"command": "true"}`), true, "could not run the command: fork failed\n--- /outputs ---")
	if len(kills) != 3 || !kills[2] {
		t.Fatalf("kills %v", kills)
	}

	// A hook that fails stops the command before it runs.
	hookErr = errors.New("disk full")
	fake.spec = sandbox.Spec{}
	expect(t, call(t, env, "bash", `{"command": "true"}`), true, "could not prepare /outputs for the command: disk full")
	if fake.spec.Command != "" {
		t.Fatal("the command ran")
	}
}

// TestPlaneMounts: the planes as bash binds them, for the shared
// workspace, the disjoint path convention (Own) and the verifier (ReadOnly).
func TestPlaneMounts(t *testing.T) {
	type m struct {
		src string
		rw  bool
	}
	for _, tc := range []struct {
		name     string
		own      string
		readOnly bool
		want     map[string]m
	}{
		{"default", "", false,
			map[string]m{"/inputs": {"/r/inputs", false}, "/workspace": {"/r/workspace", true}, "/outputs": {"/r/outputs", false}}},
		{"own", "A1", false,
			map[string]m{"/inputs": {"/r/inputs", false}, "/workspace": {"/r/workspace", false}, "/workspace/A1": {"/r/workspace/A1", true}, "/outputs": {"/r/outputs", false}}},
		{"read-only", "A1", true,
			map[string]m{"/inputs": {"/r/inputs", false}, "/workspace": {"/r/workspace", false}, "/outputs": {"/r/outputs", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &workspace.FS{Inputs: "/r/inputs", Workspace: "/r/workspace", Outputs: "/r/outputs", Own: tc.own, ReadOnly: tc.readOnly}
			ms := planeMounts(fs)
			if len(ms) != len(tc.want) {
				t.Fatalf("got %d mounts %+v, want %d", len(ms), ms, len(tc.want))
			}
			for _, got := range ms {
				w, ok := tc.want[got.Target]
				if !ok || got.Source != w.src || got.Writable != w.rw || (got.Watch != nil) != w.rw {
					t.Errorf("mount %+v, want %+v", got, w)
				}
			}
		})
	}
}
