package run_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/replay"
	"github.com/apodex/apodex/internal/run"
)

// BenchmarkResume measures how long run.Resume takes to rebuild a stopped
// run from its record (torn-tail check, record reads, every agent's
// history, the planes, the inbox) before it makes its first model call,
// against the record's length. The record is made by a real run of cheap
// turns (each writes a small workspace file: model_request, model_response,
// tool_call, tool_result, file_delta) with a small context window, so the
// history is compacted as a long run's would be; the run is then cut after
// its last model_request, as a kill during a model call leaves it. Target
// (issue 7): under 2 s for 100k events.
//
//	go test -run XXX -bench Resume -benchtime 1x ./internal/run/
func BenchmarkResume(b *testing.B) {
	runs := longRuns(b)
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			// The template: the finished run cut after its last
			// model_request, as a kill during that model call leaves it.
			tmpl := copyRun(b, runs(b, n).dir)
			if err := cutAfterLastRequest(tmpl); err != nil {
				b.Fatal(err)
			}
			c, err := record.Read(tmpl)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var total time.Duration
			for range b.N {
				b.StopTimer()
				dir := copyRun(b, tmpl)
				ctx, cancel := context.WithCancel(context.Background())
				m := &firstCall{cancel: cancel}
				b.StartTimer()
				start := time.Now()
				_, err := run.Resume(ctx, dir, run.ResumeConfig{Config: run.Config{Model: m}})
				b.StopTimer()
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if m.at.IsZero() {
					b.Fatal("the resumed run made no model call")
				}
				total += m.at.Sub(start)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-first-call")
			b.ReportMetric(float64(len(c.Events)), "events")
		})
	}
}

// BenchmarkReplayLong measures replay speed (R-REC-2) on long records:
// replay.Run of a finished run of cheap turns (every tool run again for
// real, every recorded output compared), in events of the original record
// per second.
//
//	go test -run XXX -bench ReplayLong -benchtime 1x ./internal/run/
func BenchmarkReplayLong(b *testing.B) {
	runs := longRuns(b)
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			r := runs(b, n)
			b.ResetTimer()
			var total time.Duration
			for range b.N {
				start := time.Now()
				rep, err := replay.Run(context.Background(), r.dir, replay.Config{TempDir: b.TempDir()})
				total += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if !rep.Identical {
					b.Logf("replay not identical: %+v", rep.Divergence)
				}
			}
			b.ReportMetric(float64(r.events)*float64(b.N)/total.Seconds(), "events/s")
			b.ReportMetric(float64(r.events), "events")
		})
	}
}

// firstCall is a model that notes when it is first called and stops the
// run there: what comes after the rebuild is not measured.
type firstCall struct {
	once   sync.Once
	at     time.Time
	cancel context.CancelFunc
}

func (m *firstCall) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	m.once.Do(func() { m.at = time.Now() })
	m.cancel()
	return nil, context.Canceled
}

// longRun is a finished run of a long run's events, made once per size.
type longRun struct {
	dir    string
	events int
}

// makeLongRun makes, under home, a completed run of about n events: cheap
// turns that each write a small workspace file, then finish.
func makeLongRun(b *testing.B, home string, n int) longRun {
	b.Helper()
	turns := n / 5 // each turn records 5 events
	policy := func(turn int, _ *llm.Request) (*llm.Response, error) {
		if turn >= turns {
			return scripted.Calls(scripted.Call("finish", map[string]string{"summary": "wrote the notes"})), nil
		}
		return scripted.Calls(scripted.Call("write_file", map[string]string{
			"path":    fmt.Sprintf("/workspace/notes/%03d.md", turn%200),
			"content": fmt.Sprintf("# Note %d\n\nTurn %d of a long run: a small file, as most steps write.\n", turn, turn),
		})), nil
	}
	start := time.Now()
	s, err := run.Execute(context.Background(), run.Config{
		Home: home, Objective: "write many notes", Model: scripted.New(policy),
		ModelInfo: record.ModelSettings{Provider: "scripted", Name: "bench"},
		Settings:  run.Settings{MaxAttempts: 1, Context: record.ContextSettings{Window: 16_000}},
		NewID:     func() string { return fmt.Sprintf("bench-%d", n) },
	})
	if err != nil {
		b.Fatal(err)
	}
	if s.Status != run.StatusCompleted {
		b.Fatalf("the long run ended %s: %s", s.Status, s.Error)
	}
	c, err := record.Read(s.RunDir)
	if err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(s.RunDir, record.EventsFile))
	b.Logf("made a run of %d events (%d MB) in %v", len(c.Events), st.Size()>>20, time.Since(start).Round(time.Millisecond))
	return longRun{s.RunDir, len(c.Events)}
}

// longRuns makes each size once for all the sub-benchmarks of b.
func longRuns(b *testing.B) func(b *testing.B, n int) longRun {
	home := b.TempDir()
	made := map[int]longRun{}
	return func(sb *testing.B, n int) longRun {
		if r, ok := made[n]; ok {
			return r
		}
		r := makeLongRun(sb, home, n)
		made[n] = r
		return r
	}
}

// copyRun copies a run directory into a new temporary directory.
func copyRun(b *testing.B, src string) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		b.Fatal(err)
	}
	return dir
}

// cutAfterLastRequest truncates the record after its last model_request,
// as a kill during that model call leaves it.
func cutAfterLastRequest(dir string) error {
	path := filepath.Join(dir, record.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.LastIndex(data, []byte(`"type":"model_request"`))
	if i < 0 {
		return errors.New("no model_request in the record")
	}
	end := bytes.IndexByte(data[i:], '\n')
	if end < 0 {
		return errors.New("the last model_request has no end of line")
	}
	return os.Truncate(path, int64(i+end+1))
}
