package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/procmem"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/workspace"
)

// benchSizes are the workspace sizes of issue 12's measurements.
var benchSizes = []int{0, 2000, 20000, 100000}

// benchEnv builds planes whose /workspace holds n files of 32 bytes in
// directories of 100, with the runner of kind.
func benchEnv(b *testing.B, n int, kind string) Env {
	b.Helper()
	base := b.TempDir()
	fs := &workspace.FS{Inputs: filepath.Join(base, "inputs"), Workspace: filepath.Join(base, "workspace"), Outputs: filepath.Join(base, "outputs")}
	for _, d := range []string{fs.Inputs, fs.Workspace, fs.Outputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		dir := filepath.Join(fs.Workspace, fmt.Sprintf("d%04d", i/100))
		if i%100 == 0 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i%100)), []byte("0123456789abcdef0123456789abcde\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	env := Env{FS: fs, DefaultTimeout: time.Minute, MaxTimeout: time.Minute, ObservationLimit: 16 << 10}
	if kind != "" {
		base, reuse := strings.CutSuffix(kind, "-reuse")
		r, err := sandbox.New(base)
		if err != nil {
			b.Skipf("no %s sandbox: %v", kind, err)
		}
		if reuse {
			r = sandbox.Reuse(r)
			b.Cleanup(func() { _ = sandbox.Close(r) })
		}
		env.Runner = r
	}
	return env
}

func benchCall(b *testing.B, env Env, name, args string) tool.Result {
	b.Helper()
	tl, ok := tool.NewSet(Tools(env)...).Get(name)
	if !ok {
		b.Fatalf("no tool %q", name)
	}
	r := tl.Call(context.Background(), json.RawMessage(args))
	if r.IsError {
		b.Fatalf("%s: %s", name, r.Output)
	}
	return r
}

// BenchmarkBashStep is one `bash` step (echo, plus one file written so the
// deltas are not empty) over workspaces of benchSizes files, per runner.
// The first step (which indexes the workspace once) is outside the timing.
//
//	go test -run '^$' -bench BashStep -benchtime 20x ./internal/tool/
func BenchmarkBashStep(b *testing.B) {
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNative, sandbox.KindBwrap + "-reuse", sandbox.KindNative + "-reuse", sandbox.KindNone} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/files=%d", kind, n), func(b *testing.B) {
				env := benchEnv(b, n, kind)
				benchCall(b, env, "bash", `{"command": "echo warm"}`)
				i := 0
				for b.Loop() {
					r := benchCall(b, env, "bash", fmt.Sprintf(`{"command": "echo %d > step.txt"}`, i))
					if len(r.Deltas) != 1 {
						b.Fatalf("deltas %+v", r.Deltas)
					}
					i++
				}
				b.ReportMetric(procmem.PeakRSS(), "peak-RSS-MiB")
			})
		}
	}
}

// BenchmarkFileToolStep is one write_file step over workspaces of
// benchSizes files.
//
//	go test -run '^$' -bench FileToolStep ./internal/tool/
func BenchmarkFileToolStep(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			env := benchEnv(b, n, "")
			i := 0
			for b.Loop() {
				benchCall(b, env, "write_file", fmt.Sprintf(`{"path": "/workspace/w.txt", "content": "%d"}`, i))
				i++
			}
			b.ReportMetric(procmem.PeakRSS(), "peak-RSS-MiB")
		})
	}
}
