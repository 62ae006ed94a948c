package team_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/agent"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/team"
)

// BenchmarkTeam64x20 runs a lead and 64 subagents of 20 steps each (a
// read_file per step, then report: 21 model calls) against a model with
// 100 ms latency per call, with both isolation backends and 64 or 8
// concurrent subagents. It reports:
//
//   - wall_s: the run's wall-clock time, from the lead's first call to its
//     finish;
//   - ideal_s: the critical path: the lead's turn that adds and dispatches,
//     ceil(64/concurrency) waves of 21 subagent calls, and the lead's turn
//     that resolves and finishes, each 100 ms;
//   - overhead_pct: how much longer than ideal the run took;
//   - heap_KiB/agent and live_KiB/agent: HeapInuse (as sampled, and after a
//     GC) while every slot holds a live subagent halfway through its steps,
//     minus HeapInuse before the run, divided by the live subagents;
//   - lead_turns: the lead's model calls (each wait returns on the first
//     report, so how many depends on how reports bunch).
//
// Run it once: go test ./internal/team/ -run '^$' -bench Team64x20 -benchtime 1x
func BenchmarkTeam64x20(b *testing.B) {
	for _, iso := range []string{team.PerAgent, team.Shared} {
		for _, conc := range []int{64, 8} {
			b.Run(fmt.Sprintf("%s/concurrency=%d", iso, conc), func(b *testing.B) {
				for range b.N {
					benchTeam(b, iso, conc)
				}
			})
		}
	}
}

const (
	benchAgents  = 64
	benchSteps   = 20
	benchLatency = 100 * time.Millisecond
)

func benchTeam(b *testing.B, isolation string, conc int) {
	b.StopTimer()
	h := newHarness(b)
	h.deadline, h.leadTurns = 5*time.Minute, 4*benchAgents
	h.seed("/workspace/small.txt", "a small file\nof three\nlines\n")

	lead := func(turn int, req *llm.Request) (*llm.Response, error) {
		if turn == 0 {
			var cs []llm.ToolCall
			for i := 1; i <= benchAgents; i++ {
				cs = append(cs, add(fmt.Sprintf("Part %d", i), "Read /workspace/small.txt 20 times, then report"))
			}
			for i := 1; i <= benchAgents; i++ {
				cs = append(cs, dispatch(fmt.Sprintf("T%d", i), "reader", "read_file"))
			}
			return calls(cs...), nil
		}
		for i := benchAgents; i >= 1; i-- {
			if !seen(req, fmt.Sprintf("Assignment A%d (", i)) {
				return calls(call("wait", map[string]any{"timeout_s": 300})), nil
			}
		}
		var cs []llm.ToolCall
		for i := 1; i <= benchAgents; i++ {
			cs = append(cs, resolve(fmt.Sprintf("T%d", i), fmt.Sprintf("report:A%d", i)))
		}
		return calls(append(cs, finish("all parts read"))...), nil
	}
	sub := func(turn int, req *llm.Request) (*llm.Response, error) {
		if turn < benchSteps {
			return calls(readFile("/workspace/small.txt")), nil
		}
		return calls(report("read it 20 times")), nil
	}
	sm := scripted.New(byAgent(map[string]scripted.Policy{"lead": lead, "*": sub}))

	live := min(conc, benchAgents)
	var (
		mu         sync.Mutex
		halfway    int
		sampled    bool
		heap, post uint64
		goroutines int
		leadCalls  int
	)
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		timer := time.NewTimer(benchLatency)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		mu.Lock()
		if req.Agent == "lead" {
			leadCalls++
		}
		if req.Agent != "lead" && req.Turn == benchSteps/2 {
			// The first wave's last subagent to reach halfway: every slot
			// holds a live subagent (the first wave started within one
			// dispatch turn, and none can end before step 20).
			if halfway++; halfway == live && !sampled {
				sampled = true
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap, goroutines = ms.HeapInuse, runtime.NumGoroutine()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				post = ms.HeapInuse
			}
		}
		mu.Unlock()
		return sm.Generate(ctx, req)
	})

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	b.StartTimer()
	start := time.Now()
	out := h.run(model, func(c *team.Config) {
		c.Isolation, c.Concurrency = isolation, conc
		c.SubBudget = agent.Budget{MaxTurns: benchSteps + 5}
	})
	wall := time.Since(start)
	b.StopTimer()

	if out.Termination != agent.Completed {
		b.Fatalf("termination = %s (%v)", out.Termination, out.Err)
	}
	for i := 1; i <= benchAgents; i++ {
		if st, reason := h.lastState(fmt.Sprintf("A%d", i)); st != team.Reported {
			b.Fatalf("A%d ended %s (%s)", i, st, reason)
		}
	}
	if !sampled {
		b.Fatal("memory was never sampled")
	}
	waves := (benchAgents + conc - 1) / conc
	ideal := time.Duration(2+waves*(benchSteps+1)) * benchLatency
	perAgent := func(v uint64) float64 { return float64(int64(v)-int64(base.HeapInuse)) / float64(live) / 1024 }
	b.ReportMetric(wall.Seconds(), "wall_s")
	b.ReportMetric(ideal.Seconds(), "ideal_s")
	b.ReportMetric(100*(wall.Seconds()/ideal.Seconds()-1), "overhead_pct")
	b.ReportMetric(perAgent(heap), "heap_KiB/agent")
	b.ReportMetric(perAgent(post), "live_KiB/agent")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(float64(leadCalls), "lead_turns")
}
