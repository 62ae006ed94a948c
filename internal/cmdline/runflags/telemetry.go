package runflags

import (
	"context"
	"io"

	"github.com/apodex/apodex/internal/otel"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/version"
)

// TelemetryOnLog exports the run this process executes as OpenTelemetry
// spans when OTEL_EXPORTER_OTLP_ENDPOINT is set: onLog (set it as
// run.Config.OnLog) starts the export on the run's own log (otel.StartLog),
// never polling events.jsonl; stop(started) waits for it.
func TelemetryOnLog(ctx context.Context, after int64, stderr io.Writer) (onLog func(*record.Log), stop func(started bool)) {
	var s onLogStop
	return func(l *record.Log) { s.set(otel.StartLog(ctx, l, after, version.Runtime, stderr)) }, s.stop
}
