package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/jetstream"
)

// BenchmarkEvalOnNATS is the measure of issue #30: the bundled oracle
// suite (24 rollouts) run by the local eval at --parallel N, and through N
// `apodex worker` processes (--parallel 1 each: the same total
// parallelism) against an embedded JetStream server in this process, for
// N = 1, 2, 4. It reports rollouts/s and ms per rollout; the queue's
// overhead per rollout is workers-N minus local-N. The worlds are built,
// and fetched by every worker, in a warm-up eval outside the timer.
//
//	go test -run XXX -bench EvalOnNATS -benchtime 1x -count 3 ./cmd/apodex/
func BenchmarkEvalOnNATS(b *testing.B) {
	const suite, rollouts = "../../examples/suite/oracle.yaml", 24
	sbx := testSandbox()
	home := b.TempDir()
	run := func(b *testing.B, args ...string) {
		b.Helper()
		var out, errb bytes.Buffer
		if code := Run(context.Background(), append([]string{"eval", suite, "--home", home, "--quiet", "--sandbox", sbx}, args...), &out, &errb); code != 0 {
			b.Fatalf("eval %v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
	}
	report := func(b *testing.B, d time.Duration) {
		n := float64(rollouts * b.N)
		b.ReportMetric(n/d.Seconds(), "rollouts/s")
		b.ReportMetric(float64(d.Milliseconds())/n, "ms/rollout")
	}
	run(b, "--parallel", "4") // builds the worlds
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("local-%d", n), func(b *testing.B) {
			start := time.Now()
			for range b.N {
				run(b, "--parallel", fmt.Sprint(n))
			}
			report(b, time.Since(start))
		})
		b.Run(fmt.Sprintf("workers-%d", n), func(b *testing.B) {
			srv, err := jetstream.Embedded(jetstream.ServerConfig{StoreDir: b.TempDir(), Port: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown()
			for i := range n {
				startWorker(b, srv.URL(), fmt.Sprintf("bench-%d", i), 1, "30s")
			}
			run(b, "--nats", srv.URL(), "--wait") // every worker fetches the worlds
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				run(b, "--nats", srv.URL(), "--wait")
			}
			report(b, time.Since(start))
		})
	}
}
