package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apodex/apodex/internal/otel"
	"github.com/apodex/apodex/internal/run"
)

// telemetryWait is how long a command waits, after its run ended, for the
// spans to be exported.
const telemetryWait = 10 * time.Second

// startTelemetry exports the run in dir as OpenTelemetry spans when
// OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise it does nothing at all.
// stop(started) waits for the export when the run started, else drops it.
func startTelemetry(ctx context.Context, dir string, after int64, stderr io.Writer) (stop func(started bool)) {
	if !otel.Enabled() {
		return func(bool) {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // the run's end, not Ctrl-C, ends the export
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := otel.Export(ctx, dir, after, run.Version); err != nil && ctx.Err() == nil {
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
