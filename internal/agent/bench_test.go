package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/tool"
	"github.com/apodex/apodex/internal/tool/builtin"
)

// The step benchmarks measure the harness's own cost per step: a zero-latency
// scripted model makes one tool call per turn for b.N turns, then finishes.
// Everything else is real: the record (event writes, blobs, the fsync at each
// step boundary), the planes on disk, the built-in tools and, for bash, the
// sandbox (bubblewrap and native). ns/step is the wall time of agent.Run over b.N; the
// final finish turn is amortised into it.
//
//	go test -run XXX -bench '^BenchmarkStep' -benchtime 200x -count 5 ./internal/agent/

func BenchmarkStepFileTool(b *testing.B) {
	cfg, dir := benchConfig(b, nil, func(i int) llm.ToolCall {
		return scripted.Call("write_file", map[string]string{"path": "notes.txt", "content": fmt.Sprintf("step %d\n", i)})
	})
	runSteps(b, cfg)
	// Every step changed the file, so every step stored a delta and a blob.
	if n := count(b, dir, record.TypeFileDelta); n != b.N {
		b.Fatalf("file_delta events %d, want %d", n, b.N)
	}
}

// BenchmarkStepBash runs on each sandbox backend (bwrap, native).
func BenchmarkStepBash(b *testing.B) {
	for _, kind := range []string{sandbox.KindBwrap, sandbox.KindNative} {
		b.Run(kind, func(b *testing.B) {
			runner, err := sandbox.New(kind)
			if err != nil {
				b.Skipf("no %s sandbox here: %v", kind, err)
			}
			cfg, dir := benchConfig(b, runner, func(int) llm.ToolCall {
				return scripted.Call("bash", map[string]string{"command": "echo hi > f"})
			})
			runSteps(b, cfg)
			if n := count(b, dir, record.TypeFileDelta); n != 1 {
				b.Fatalf("file_delta events %d, want 1 (f is created once, then rewritten unchanged)", n)
			}
		})
	}
}

// benchConfig builds an agent with a real record and real planes in a
// temporary directory, whose model makes call(i) at turn i < b.N and then
// finishes. It returns the config and the run directory.
func benchConfig(b *testing.B, runner sandbox.Runner, call func(i int) llm.ToolCall) (agent.Config, string) {
	b.Helper()
	dir := b.TempDir()
	fs := runtest.Planes(b, dir)
	log := runtest.Record(b, dir)
	n := b.N
	model := scripted.New(func(turn int, _ *llm.Request) (*llm.Response, error) {
		resp := scripted.Calls(scripted.Call("finish", map[string]string{"summary": "done"}))
		if turn < n {
			resp = scripted.Calls(call(turn))
		}
		// A fixed usage skips the scripted estimate, which walks the whole
		// history and would make the model's cost grow with b.N.
		resp.Usage = llm.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, Reported: true}
		return resp, nil
	})
	tools := append(builtin.Tools(builtin.Env{FS: fs, Runner: runner}), tool.FinishTool{})
	rt := agent.Runtime{Model: model, Log: log, FS: fs, Retry: llm.RetryPolicy{MaxAttempts: 1}}
	return rt.Assemble(agent.Spec{Tools: tools}), dir
}

// runSteps times one agent.Run of b.N tool steps and the finish step.
func runSteps(b *testing.B, cfg agent.Config) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	out := agent.Run(context.Background(), cfg, "benchmark the harness")
	elapsed := time.Since(start)
	b.StopTimer()
	if out.Termination != agent.Completed || out.ToolCalls != b.N+1 {
		b.Fatalf("termination %s after %d tool calls, want completed after %d (%v)", out.Termination, out.ToolCalls, b.N+1, out.Err)
	}
	for _, m := range out.History {
		if m.Role == llm.RoleTool && m.IsError {
			b.Fatalf("%s failed: %s", m.Name, m.Content)
		}
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/step")
}

func count(b *testing.B, dir, typ string) int {
	b.Helper()
	c, err := record.Read(dir)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range c.Events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
