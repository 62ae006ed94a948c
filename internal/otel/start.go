package otel

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/apodex/apodex/internal/record"
)

// telemetryWait is how long a command waits, after its run ended, for the
// spans to be exported.
const telemetryWait = 10 * time.Second

// Start exports the run in dir as spans in a goroutine it owns when
// OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise it does nothing at all. An
// export error is one line on stderr. stop(started) waits for the export
// (at most telemetryWait) when the run started, else drops it.
func Start(ctx context.Context, dir string, after int64, version string, stderr io.Writer) (stop func(started bool)) {
	return start(ctx, dir, version, stderr, func(ctx context.Context) iter.Seq2[record.Event, error] { return record.Follow(ctx, dir, after) })
}

// StartLog is Start for the run whose log is in this process: the events
// come from the log itself (record.Log.Subscribe), never from polling the
// file; the export ends when the log is closed.
func StartLog(ctx context.Context, log *record.Log, after int64, version string, stderr io.Writer) (stop func(started bool)) {
	return start(ctx, log.Dir(), version, stderr, func(ctx context.Context) iter.Seq2[record.Event, error] { return log.Subscribe(ctx, after) })
}

func start(ctx context.Context, dir, version string, stderr io.Writer, events func(context.Context) iter.Seq2[record.Event, error]) (stop func(started bool)) {
	if !Enabled() {
		return func(bool) {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // the run's end, not Ctrl-C, ends the export
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ExportEvents(ctx, dir, events(ctx), version); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "apodex: OpenTelemetry export: %v (check OTEL_EXPORTER_OTLP_ENDPOINT)\n", err)
		}
	}()
	return func(started bool) {
		if started {
			select {
			case <-done:
			case <-time.After(telemetryWait):
			}
		}
		cancel()
		<-done
	}
}
