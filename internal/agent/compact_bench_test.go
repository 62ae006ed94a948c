package agent

import (
	"context"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// BenchmarkCompaction300Steps: a 300-step run with 20 KB observations
// against a 32k-token window. It reports the peak prompt the model was sent,
// the number of compactions per tier and the tokens they saved.
//
//	go test -run XXX -bench Compaction300 -benchtime 1x ./internal/agent/
func BenchmarkCompaction300Steps(b *testing.B) {
	for i := 0; i < b.N; i++ {
		m := &reportingModel{turns: readTurns(300)}
		dir := b.TempDir()
		log, err := record.Create(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Model: m, Tools: tool.NewSet(bigRead(20<<10), tool.FinishTool{}), Log: log,
			Retry: llm.RetryPolicy{MaxAttempts: 1}, Context: Context{Window: 32000}, Budget: Budget{MaxTurns: 400}}
		out := Run(context.Background(), cfg, "read 300 files")
		log.Close()
		if out.Termination != Completed {
			b.Fatalf("termination %s: %v", out.Termination, out.Err)
		}
		peak := 0
		for _, r := range m.agentRequests() {
			peak = max(peak, estimateTokens(r.Messages))
		}
		c, err := record.Read(dir)
		if err != nil {
			b.Fatal(err)
		}
		tiers := map[int]int{}
		saved := 0
		for _, e := range c.Events {
			if e.Type != record.TypeCompaction {
				continue
			}
			var cp record.Compaction
			e.Decode(&cp)
			if cp.Stopped == "" {
				tiers[cp.Tier]++
				saved += cp.TokensBefore - cp.TokensAfter
			}
		}
		b.ReportMetric(float64(peak), "peak-prompt-tokens")
		b.ReportMetric(float64(tiers[1]), "tier1")
		b.ReportMetric(float64(tiers[2]), "tier2")
		b.ReportMetric(float64(saved), "tokens-saved")
	}
}
