package runstate_test

import (
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runstate"
)

// BenchmarkLoad folds a record of 100k events (model responses, tool
// calls and results, file deltas of four agents) from disk.
//
//	go test -run XXX -bench Load -benchtime 5x ./internal/runstate/
func BenchmarkLoad(b *testing.B) {
	bl := &builder{t: &testing.T{}, dir: b.TempDir()}
	log, err := record.Create(bl.dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	bl.log = log
	bl.add(record.TypeRunStarted, "", record.RunStarted{RunID: "r", Tools: []string{"dispatch"}})
	agents := []string{"lead", "A1", "A2", "A3"}
	for i := 1; i < 25_000; i++ {
		a := agents[i%4]
		bl.add(record.TypeModelResponse, a, record.ModelResponse{Turn: i, Usage: usage(1000, 50)})
		bl.add(record.TypeToolCall, a, record.ToolCall{Turn: i, CallID: "c", Name: "write_file", Arguments: `{"path":"/workspace/x","content":"y"}`})
		bl.add(record.TypeToolResult, a, record.ToolResult{Turn: i, CallID: "c", Name: "write_file", Output: "created /workspace/x (1 B, 1 line)"})
		bl.add(record.TypeFileDelta, a, record.FileDelta{CallID: "c", Path: "/workspace/x", Bytes: 1, Content: "y"})
	}
	log.Close()
	b.ResetTimer()
	for b.Loop() {
		st, err := runstate.Load(bl.dir)
		if err != nil || st.Events != 99_997 {
			b.Fatalf("%v, %d events", err, st.Events)
		}
	}
	b.ReportMetric(float64(99_997*b.N)/b.Elapsed().Seconds(), "events/s")
}
