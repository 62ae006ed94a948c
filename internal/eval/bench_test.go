package eval

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// BenchmarkEvalThroughput runs one eval of 100 small generated file worlds
// (level 1) with a zero-latency scripted model (the oracle) per iteration,
// at --parallel 2, 4 and 8, and reports rollouts per second. Every rollout is
// a full run: record, overlay sandbox, tools, delivery and the verifier in
// bwrap (when installed).
func BenchmarkEvalThroughput(b *testing.B) {
	home := b.TempDir()
	st := world.NewStore(home)
	s := &Suite{Name: "bench", Rollouts: 1, Configs: []Config{{Name: "oracle"}}}
	for seed := int64(1); seed <= 100; seed++ {
		dir := filepath.Join(b.TempDir(), fmt.Sprint(seed))
		if _, err := gen.Generate(gen.Spec{Family: "file", Seed: seed, Level: 1}, dir); err != nil {
			b.Fatal(err)
		}
		w, _, err := st.Build(dir)
		if err != nil {
			b.Fatal(err)
		}
		s.Worlds = append(s.Worlds, WorldRef{ID: w.ID})
	}
	sbx := sandbox.KindAuto
	if _, err := sandbox.New(sandbox.KindAuto); err != nil {
		sbx = "none"
	}
	for _, p := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("parallel%d", p), func(b *testing.B) {
			opts := Options{Home: home, Parallel: p, Sandbox: sbx, NewModel: func(_ Config, w *world.World) (llm.Model, record.ModelSettings, error) {
				return Oracle(w)
			}}
			for i := 0; i < b.N; i++ {
				id, err := Start(context.Background(), s, opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				rs, _ := ReadResults(home, id)
				for _, r := range rs {
					if r.Correct != 1 {
						b.Fatalf("oracle rollout failed: %+v", r)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "rollouts/s")
		})
	}
}
