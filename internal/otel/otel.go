// Package otel exports a run as OpenTelemetry traces over OTLP/HTTP,
// following the GenAI semantic conventions: one invoke_agent span per agent,
// one chat span per model call (gen_ai.request.model, gen_ai.usage.input_tokens,
// gen_ai.usage.output_tokens) and one execute_tool span per tool call
// (gen_ai.tool.name). It is the only package that imports the OpenTelemetry SDK.
//
// Guarantees:
//   - it is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: Enabled is one environment
//     lookup, and nothing else of this package runs when it is false;
//   - spans are built from the record alone (record.Follow), so the agent
//     loop carries no telemetry code and a finished run exports the same
//     spans as a live one; span times are the record's: a model call or
//     tool call ends at its event and lasts its recorded duration_ms;
//   - the first agent's span is the trace's root and every other agent's
//     span is its child; chat and execute_tool spans are children of their
//     agent's span;
//   - Export flushes before it returns; an exporter that cannot reach its
//     endpoint costs the run nothing but the lost spans.
package otel

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/apodex/apodex/internal/record"
)

// Enabled reports whether an OTLP endpoint is configured.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// flushWait bounds the final export.
const flushWait = 5 * time.Second

// Export follows the record of the run in dir from the event after seq
// after (0: from the start; a resume passes where it took over) and
// exports its spans to the endpoint the OTEL_EXPORTER_OTLP_* variables name.
// It returns after the run's run_finished event (or when ctx ends), once
// the spans are flushed.
func Export(ctx context.Context, dir string, after int64, version string) error {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return fmt.Errorf("otel: exporter: %w", err)
	}
	res, _ := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "apodex"), attribute.String("service.version", version)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushWait)
		defer cancel()
		tp.Shutdown(sctx)
	}()
	sp := newSpans(tp.Tracer("github.com/apodex/apodex"))
	defer sp.close()
	for e, err := range record.Follow(ctx, dir, after) {
		if err != nil {
			return fmt.Errorf("otel: %w", err)
		}
		sp.add(e)
	}
	return nil
}

// spans turns record events into spans as they come.
type spans struct {
	tracer   trace.Tracer
	runID    string
	model    record.ModelSettings
	root     context.Context // the first agent's span
	agents   map[string]*agentSpan
	order    []string
	lastTime time.Time
}

type agentSpan struct {
	ctx  context.Context
	span trace.Span
	last time.Time
}

func newSpans(t trace.Tracer) *spans {
	return &spans{tracer: t, agents: map[string]*agentSpan{}}
}

// Semantic convention attribute keys.
const (
	opName       = "gen_ai.operation.name"
	providerName = "gen_ai.provider.name"
	agentName    = "gen_ai.agent.name"
	agentID      = "gen_ai.agent.id"
	conversation = "gen_ai.conversation.id"
	requestModel = "gen_ai.request.model"
	responseMod  = "gen_ai.response.model"
	inputTokens  = "gen_ai.usage.input_tokens"
	outputTokens = "gen_ai.usage.output_tokens"
	finishReason = "gen_ai.response.finish_reasons"
	toolName     = "gen_ai.tool.name"
	toolCallID   = "gen_ai.tool.call.id"
	toolType     = "gen_ai.tool.type"
	errorType    = "error.type"
)

func (s *spans) add(e record.Event) {
	s.lastTime = e.Time
	switch e.Type {
	case record.TypeRunStarted:
		var rs record.RunStarted
		if e.Decode(&rs) == nil {
			s.runID, s.model = rs.RunID, rs.Model
		}
		return
	case record.TypeRunFinished:
		s.close()
		return
	case record.TypeModelRequest, record.TypeModelResponse, record.TypeModelError, record.TypeToolCall, record.TypeToolResult:
	default:
		if a := s.agents[e.Agent]; a != nil {
			a.last = e.Time
		}
		return
	}
	if e.Agent == "" {
		return
	}
	a := s.agent(e.Agent, e.Time)
	a.last = e.Time
	switch e.Type {
	case record.TypeModelResponse:
		var mr record.ModelResponse
		if e.Decode(&mr) != nil {
			return
		}
		model := s.model.Name // requested; the reply names the model that answered
		if model == "" {
			model = mr.Model
		}
		attrs := []attribute.KeyValue{
			attribute.String(opName, "chat"),
			attribute.String(providerName, s.model.Provider),
			attribute.String(agentName, e.Agent),
			attribute.Int(inputTokens, mr.Usage.PromptTokens),
			attribute.Int(outputTokens, mr.Usage.CompletionTokens),
			attribute.Int("apodex.turn", mr.Turn),
			attribute.Int64("apodex.seq", e.Seq),
		}
		if model != "" {
			attrs = append(attrs, attribute.String(requestModel, model))
		}
		if mr.Model != "" {
			attrs = append(attrs, attribute.String(responseMod, mr.Model))
		}
		if mr.FinishReason != "" {
			attrs = append(attrs, attribute.StringSlice(finishReason, []string{mr.FinishReason}))
		}
		if mr.Purpose != "" {
			attrs = append(attrs, attribute.String("apodex.purpose", mr.Purpose))
		}
		s.child(a, spanName("chat", model), trace.SpanKindClient, e.Time, mr.DurationMS, attrs, "")
	case record.TypeModelError:
		var me record.ModelError
		e.Decode(&me)
		attrs := []attribute.KeyValue{attribute.String(opName, "chat"), attribute.String(providerName, s.model.Provider),
			attribute.String(errorType, "model_error")}
		if s.model.Name != "" {
			attrs = append(attrs, attribute.String(requestModel, s.model.Name))
		}
		s.child(a, spanName("chat", s.model.Name), trace.SpanKindClient, e.Time, 0, attrs, me.Error)
	case record.TypeToolResult:
		var tr record.ToolResult
		if e.Decode(&tr) != nil {
			return
		}
		attrs := []attribute.KeyValue{
			attribute.String(opName, "execute_tool"),
			attribute.String(toolName, tr.Name),
			attribute.String(toolCallID, tr.CallID),
			attribute.String(toolType, "function"),
			attribute.String(agentName, e.Agent),
			attribute.Int64("apodex.seq", e.Seq),
		}
		msg := ""
		if tr.IsError {
			attrs = append(attrs, attribute.String(errorType, "tool_error"))
			msg = firstLine(tr.Output)
		}
		s.child(a, spanName("execute_tool", tr.Name), trace.SpanKindInternal, e.Time, tr.DurationMS, attrs, msg)
	}
}

// agent is the span of agent id, started at its first event.
func (s *spans) agent(id string, at time.Time) *agentSpan {
	if a := s.agents[id]; a != nil {
		return a
	}
	parent := s.root
	if parent == nil {
		parent = context.Background()
	}
	ctx, span := s.tracer.Start(parent, spanName("invoke_agent", id), trace.WithTimestamp(at), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String(opName, "invoke_agent"), attribute.String(agentName, id), attribute.String(agentID, id),
			attribute.String(conversation, s.runID), attribute.String(providerName, s.model.Provider)))
	if s.root == nil {
		s.root = ctx
	}
	a := &agentSpan{ctx: ctx, span: span, last: at}
	s.agents[id] = a
	s.order = append(s.order, id)
	return a
}

// child records one finished call under its agent: it ended at end and
// lasted ms milliseconds.
func (s *spans) child(a *agentSpan, name string, kind trace.SpanKind, end time.Time, ms int64, attrs []attribute.KeyValue, errMsg string) {
	start := end.Add(-time.Duration(ms) * time.Millisecond)
	_, span := s.tracer.Start(a.ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if errMsg != "" {
		span.SetStatus(codes.Error, errMsg)
	}
	span.End(trace.WithTimestamp(end))
}

// close ends every agent span at its agent's last event, children first.
func (s *spans) close() {
	for i := len(s.order) - 1; i >= 0; i-- {
		a := s.agents[s.order[i]]
		a.span.End(trace.WithTimestamp(a.last))
	}
	s.order, s.agents = nil, map[string]*agentSpan{}
}

// spanName is "{operation} {target}", or the operation alone.
func spanName(op, target string) string {
	if target == "" {
		return op
	}
	return op + " " + target
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' || i >= 200 {
			return s[:i]
		}
	}
	return s
}
