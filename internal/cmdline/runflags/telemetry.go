package runflags

import (
	"context"
	"io"

	"github.com/apodex/apodex/internal/otel"
	"github.com/apodex/apodex/internal/version"
)

// StartTelemetry exports the run in dir as OpenTelemetry spans when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (otel.Start).
func StartTelemetry(ctx context.Context, dir string, after int64, stderr io.Writer) (stop func(started bool)) {
	return otel.Start(ctx, dir, after, version.Runtime, stderr)
}
