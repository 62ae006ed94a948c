package otel

import (
	"context"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The attributes and metrics of chat spans, and the names and classes the
// spans are given.

// chatAttrs are the attributes every chat span of l has.
func (s *spans) chatAttrs(l *loop) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(opName, "chat"), attribute.String(providerName, provider(s.model.Provider)),
		attribute.String(agentName, l.role), attribute.String(conversation, s.runID+"/"+l.id), attribute.Bool(requestStream, s.model.Stream)}
	if s.model.Name != "" {
		attrs = append(attrs, attribute.String(requestModel, s.model.Name))
	}
	return append(attrs, s.serverAttrs()...)
}

func (s *spans) serverAttrs() []attribute.KeyValue {
	if s.server == "" {
		return nil
	}
	attrs := []attribute.KeyValue{attribute.String(serverAddress, s.server)}
	if s.port > 0 {
		attrs = append(attrs, attribute.Int(serverPort, s.port))
	}
	return attrs
}

// record adds one call to the client metrics.
func (s *spans) record(ctx context.Context, in, out int, seconds float64, respModel, errType string) {
	if s.tokens == nil {
		return
	}
	base := []attribute.KeyValue{attribute.String(opName, "chat"), attribute.String(providerName, provider(s.model.Provider)), attribute.String(requestModel, s.model.Name)}
	if respModel != "" {
		base = append(base, attribute.String(responseMod, respModel))
	}
	base = append(base, s.serverAttrs()...)
	if errType != "" {
		s.duration.Record(ctx, seconds, metric.WithAttributes(append(base, attribute.String(errorType, errType))...))
		return
	}
	s.duration.Record(ctx, seconds, metric.WithAttributes(base...))
	s.tokens.Record(ctx, int64(in), metric.WithAttributes(append(base, attribute.String(tokenType, "input"))...))
	s.tokens.Record(ctx, int64(out), metric.WithAttributes(append(base, attribute.String(tokenType, "output"))...))
}

// provider is gen_ai.provider.name for a recorded provider.
func provider(p string) string {
	switch p {
	case "":
		return "apodex"
	case "scripted", "replay":
		return "apodex." + p
	}
	return p
}

// errorClass is error.type for a failed call: the HTTP status it names,
// else a short class.
func errorClass(msg string) string {
	for _, f := range strings.FieldsFunc(msg, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(f); err == nil && n >= 400 && n <= 599 && len(f) == 3 {
			return f
		}
	}
	switch {
	case strings.Contains(msg, "context window"), strings.Contains(msg, "too long"):
		return "context_overflow"
	case strings.Contains(msg, "timeout"), strings.Contains(msg, "deadline"):
		return "timeout"
	}
	return "_OTHER"
}

// runtimeRole is the role of an agent no dispatch named.
func runtimeRole(id string) string {
	switch {
	case id == "main":
		return "apodex"
	case len(id) > 1 && id[1] >= '0' && id[1] <= '9':
		switch id[0] {
		case 'I':
			return "investigator"
		case 'V':
			return "verifier"
		case 'W':
			return "writer"
		}
	}
	return id // lead, verifier, writer
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
