// Package otel exports a run as OpenTelemetry traces and metrics over
// OTLP, following the GenAI semantic conventions (docs/otel.md lists every
// attribute). It is the only package that imports the OpenTelemetry SDK.
//
// Guarantees:
//   - it is off unless an OTLP endpoint is configured
//     (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
//     and OTEL_SDK_DISABLED is not "true": Enabled is a few environment
//     lookups, and nothing else of this package runs when it is false;
//   - OTEL_EXPORTER_OTLP_PROTOCOL (or _TRACES_/_METRICS_PROTOCOL) chooses
//     grpc or http/protobuf (the default); OTEL_SERVICE_NAME and
//     OTEL_RESOURCE_ATTRIBUTES name the resource (service.name "apodex"
//     when unset);
//   - spans are built from the record alone (record.Follow), so the agent
//     loop carries no telemetry code and a finished run exports the same
//     spans as a live one; span times are the record's;
//   - a team run's spans hang under one invoke_workflow span; each agent
//     loop (each verifier of parallel verify calls apart) has its own
//     invoke_agent span, under the execute_tool span of the call that
//     started it (dispatch, verify, the finish that ran an effort wave or
//     the writer); chat, retry and execute_tool spans are children of
//     their agent's span;
//   - message content is captured only with
//     OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true;
//   - Export flushes before it returns; an exporter that cannot reach its
//     endpoint costs the run nothing but the lost telemetry.
package otel

import (
	"context"
	"fmt"
	"iter"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/apodex/apodex/internal/record"
)

// Enabled reports whether an OTLP endpoint is configured and the SDK is
// not disabled.
func Enabled() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// CaptureContent reports whether message content is to be recorded.
func CaptureContent() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")), "true")
}

// flushWait bounds the final export.
const flushWait = 5 * time.Second

// protocol is the OTLP protocol for a signal ("traces", "metrics").
func protocol(signal string) string {
	p := os.Getenv("OTEL_EXPORTER_OTLP_" + strings.ToUpper(signal) + "_PROTOCOL")
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	return strings.TrimSpace(p)
}

func traceExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch p := protocol("traces"); p {
	case "grpc":
		return otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: use grpc or http/protobuf", p)
	}
}

// metricExporter is nil when no endpoint serves metrics (only a traces
// endpoint was given) or OTEL_METRICS_EXPORTER is none.
func metricExporter(ctx context.Context) (sdkmetric.Exporter, error) {
	if os.Getenv("OTEL_METRICS_EXPORTER") == "none" || (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") == "") {
		return nil, nil
	}
	switch p := protocol("metrics"); p {
	case "grpc":
		return otlpmetricgrpc.New(ctx)
	case "", "http/protobuf":
		return otlpmetrichttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: use grpc or http/protobuf", p)
	}
}

// Resource is the telemetry's resource: service.name "apodex" and
// service.version, then what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say, which win.
func Resource(ctx context.Context, version string) (*resource.Resource, error) {
	return resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "apodex"), attribute.String("service.version", version)),
		resource.WithFromEnv())
}

// Export follows the record of the run in dir from the event after seq
// after (0: from the start; a resume passes where it took over) and
// exports its spans and metrics to the endpoint the OTEL_EXPORTER_OTLP_*
// variables name. It returns after the run's run_finished event (or when
// ctx ends), once everything is flushed.
func Export(ctx context.Context, dir string, after int64, version string) error {
	return ExportEvents(ctx, dir, record.Follow(ctx, dir, after), version)
}

// ExportEvents is Export over events, the events of the run in dir from
// where the export starts: record.Follow's (another process's run) or the
// run's own log's (record.Log.Subscribe, in the process that runs it: no
// polling). It returns when events end, once everything is flushed.
func ExportEvents(ctx context.Context, dir string, events iter.Seq2[record.Event, error], version string) error {
	res, err := Resource(ctx, version)
	if err != nil {
		return fmt.Errorf("otel: resource: %w", err)
	}
	exp, err := traceExporter(ctx)
	if err != nil {
		return fmt.Errorf("otel: exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	var mp *sdkmetric.MeterProvider
	if mexp, err := metricExporter(ctx); err != nil {
		return fmt.Errorf("otel: metric exporter: %w", err)
	} else if mexp != nil {
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)))
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushWait)
		defer cancel()
		tp.Shutdown(sctx)
		if mp != nil {
			mp.Shutdown(sctx)
		}
	}()
	sp := newSpans(tp.Tracer("github.com/apodex/apodex"), dir, CaptureContent())
	if mp != nil {
		sp.meters(mp.Meter("github.com/apodex/apodex"))
	}
	defer sp.close()
	for e, err := range events {
		if err != nil {
			return fmt.Errorf("otel: %w", err)
		}
		sp.add(ctx, e)
	}
	return nil
}
