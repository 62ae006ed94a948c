package otel_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/llm/openai"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/otel"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runtest"
)

// receiver is an in-process OTLP endpoint on loopback: over HTTP it
// decodes protobuf posts to /v1/traces and /v1/metrics; over gRPC it
// serves the trace and metrics services. It keeps what it is sent.
type receiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
	metrics  map[string]bool
}

func newReceiver() *receiver {
	return &receiver{resource: map[string]string{}, metrics: map[string]bool{}}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf", http.StatusBadRequest)
		return
	}
	var out proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.Export(r.Context(), &req)
		out = &coltrace.ExportTraceServiceResponse{}
	case "/v1/metrics":
		var req colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.exportMetrics(&req)
		out = &colmetrics.ExportMetricsServiceResponse{}
	default:
		http.Error(w, "no such path", http.StatusNotFound)
		return
	}
	raw, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(raw)
}

func (rc *receiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.Resource.GetAttributes() {
			rc.resource[kv.Key] = kv.Value.GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetrics.UnimplementedMetricsServiceServer
	rc *receiver
}

func (m metricsService) Export(_ context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	m.rc.exportMetrics(req)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

func (rc *receiver) exportMetrics(req *colmetrics.ExportMetricsServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h := m.GetHistogram(); h != nil && len(h.DataPoints) > 0 {
					rc.metrics[m.Name] = true
				}
			}
		}
	}
}

func teamRun(t *testing.T) string {
	t.Helper()
	m, err := scripted.Load("../../examples/team-csv/script.json")
	if err != nil {
		t.Fatal(err)
	}
	runtest.NeedSandbox(t) // the team demo's script expects what the sandbox shows
	sandbox := runtest.SandboxKind()
	s, err := run.Execute(context.Background(), run.Config{
		Home: t.TempDir(), Objective: "Sum north and south and report", Model: m,
		ModelInfo: record.ModelSettings{Provider: "scripted", Name: "script-1"}, InputsDir: "../../examples/team-csv/inputs",
		Settings: run.Settings{MaxAttempts: 1, Mode: run.ModeTeam, Sandbox: sandbox},
	})
	if err != nil || s.Status != run.StatusCompleted {
		t.Fatalf("team run: %v %s", err, s.Status)
	}
	return s.RunDir
}

func TestExportFollowsTheGenAIConventions(t *testing.T) {
	dir := teamRun(t)
	rc := newReceiver()
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "trainer-farm")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	if !otel.Enabled() {
		t.Fatal("not enabled with the endpoint set")
	}
	if err := otel.Export(context.Background(), dir, 0, "test"); err != nil {
		t.Fatal(err)
	}
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wantIn, wantOut, responses, results, verdicts int
	tools := map[string]int{}
	for _, e := range c.Events {
		switch e.Type {
		case record.TypeModelResponse:
			var mr record.ModelResponse
			e.Decode(&mr)
			wantIn += mr.Usage.PromptTokens
			wantOut += mr.Usage.CompletionTokens
			responses++
		case record.TypeToolResult:
			var tr record.ToolResult
			e.Decode(&tr)
			tools[tr.Name]++
			results++
		case record.TypeVerdict:
			verdicts++
		}
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.resource["service.name"] != "trainer-farm" || rc.resource["deployment.environment"] != "test" {
		t.Errorf("resource %v: service.name is not OTEL_SERVICE_NAME's, or OTEL_RESOURCE_ATTRIBUTES was not read", rc.resource)
	}
	if !rc.metrics["gen_ai.client.token.usage"] || !rc.metrics["gen_ai.client.operation.duration"] {
		t.Errorf("metrics received: %v", rc.metrics)
	}
	byID := map[string]*tracepb.Span{}
	var workflow *tracepb.Span
	agents := map[string][]*tracepb.Span{} // by gen_ai.agent.id's agent
	var chats, execs []*tracepb.Span
	events := 0
	for _, s := range rc.spans {
		byID[string(s.SpanId)] = s
		switch str(s, "gen_ai.operation.name") {
		case "invoke_workflow":
			workflow = s
		case "invoke_agent":
			id, _, _ := strings.Cut(str(s, "gen_ai.agent.id"), ".")
			agents[id] = append(agents[id], s)
			for _, ev := range s.Events {
				if ev.Name == "gen_ai.evaluation.result" && attr(ev.Attributes, "gen_ai.evaluation.score.label") != "" {
					events++
				}
			}
		case "chat":
			chats = append(chats, s)
		case "execute_tool":
			execs = append(execs, s)
		}
	}
	if workflow == nil || len(workflow.ParentSpanId) != 0 {
		t.Fatalf("no root invoke_workflow span for the team run")
	}
	parentOf := func(s *tracepb.Span) *tracepb.Span { return byID[string(s.ParentSpanId)] }
	if l := agents["lead"]; len(l) != 1 || parentOf(l[0]) != workflow || l[0].Name != "invoke_agent lead" || str(l[0], "gen_ai.request.model") != "script-1" {
		t.Errorf("lead: %d spans; want one under the workflow, named by role, with the model", len(l))
	}
	for _, a := range []string{"A1", "A2", "A3"} {
		s := agents[a]
		if len(s) != 1 {
			t.Errorf("%s: %d invoke_agent spans", a, len(s))
			continue
		}
		if p := parentOf(s[0]); p == nil || str(p, "gen_ai.tool.name") != "dispatch" {
			t.Errorf("%s hangs under %v, not under its dispatch call", a, p.GetName())
		}
		if name := str(s[0], "gen_ai.agent.name"); name == a || name == "" {
			t.Errorf("%s is named %q, not by its role", a, name)
		}
	}
	// The lead verifies two claims in one turn: one span per verifier,
	// each under its own verify call.
	// (The runtime names them V1 and V2.)
	if v1, v2 := agents["V1"], agents["V2"]; len(v1) != 1 || len(v2) != 1 {
		t.Errorf("verifier spans: V1 %d, V2 %d; want one each", len(v1), len(v2))
	} else if p0, p1 := parentOf(v1[0]), parentOf(v2[0]); p0 == nil || p1 == nil || p0 == p1 || str(p0, "gen_ai.tool.name") != "verify" || str(p1, "gen_ai.tool.name") != "verify" {
		t.Errorf("the verifier spans do not hang under two verify calls")
	}
	if events != verdicts || verdicts == 0 {
		t.Errorf("%d gen_ai.evaluation.result events for %d verdicts", events, verdicts)
	}
	if len(chats) != responses || len(execs) != results {
		t.Fatalf("%d chat and %d execute_tool spans; the record has %d model responses and %d tool results", len(chats), len(execs), responses, results)
	}
	var in, out int64
	for _, s := range chats {
		in += num(s, "gen_ai.usage.input_tokens")
		out += num(s, "gen_ai.usage.output_tokens")
		if str(s, "gen_ai.request.model") != "script-1" || s.Name != "chat script-1" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT || str(s, "gen_ai.conversation.id") == "" {
			t.Errorf("chat span %q model %q kind %v conversation %q", s.Name, str(s, "gen_ai.request.model"), s.Kind, str(s, "gen_ai.conversation.id"))
		}
		if p := parentOf(s); p == nil || str(p, "gen_ai.operation.name") != "invoke_agent" {
			t.Errorf("chat span %q is not a child of an agent span", s.Name)
		}
		if str(s, "gen_ai.input.messages") != "" {
			t.Errorf("content captured without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
		}
	}
	if in != int64(wantIn) || out != int64(wantOut) || in == 0 {
		t.Errorf("tokens in %d out %d, the record says %d and %d", in, out, wantIn, wantOut)
	}
	got := map[string]int{}
	for _, s := range execs {
		got[str(s, "gen_ai.tool.name")]++
		if string(s.TraceId) != string(workflow.TraceId) {
			t.Errorf("tool span %q in another trace", s.Name)
		}
	}
	for name, n := range tools {
		if got[name] != n {
			t.Errorf("execute_tool %s: %d spans, %d results", name, got[name], n)
		}
	}
}

// A run against an OpenAI-compatible endpoint that answers 429 once: the
// retry is its own span, chat spans carry the server, the stream flag and
// the reply's id, and with content capture on the messages as sent.
func TestChatSpansRetriesAndContent(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			ep := llmtest.NewOpenAI(t, llmtest.Script(
				llmtest.Turn{Status: 429, RetryAfter: "0"},
				llmtest.Turn{Calls: []llm.ToolCall{{Name: "finish", Arguments: `{"summary":"done"}`}}, Usage: &llm.Usage{PromptTokens: 50, CompletionTokens: 5, TotalTokens: 55, CachedTokens: 32, Reported: true}},
			))
			s, err := run.Execute(context.Background(), run.Config{
				Home: t.TempDir(), Objective: "finish at once", Model: openai.New(openai.Config{BaseURL: ep.URL, Model: "m"}),
				ModelInfo: record.ModelSettings{Provider: "openai", Name: "m", BaseURL: ep.URL},
				Settings:  run.Settings{MaxAttempts: 3, Sandbox: "none"},
			})
			if err != nil {
				t.Fatal(err)
			}
			rc := newReceiver()
			if proto == "grpc" {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				g := grpc.NewServer()
				coltrace.RegisterTraceServiceServer(g, rc)
				colmetrics.RegisterMetricsServiceServer(g, metricsService{rc: rc})
				go g.Serve(lis)
				defer g.Stop()
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
			} else {
				srv := httptest.NewServer(rc)
				defer srv.Close()
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
			if err := otel.Export(context.Background(), s.RunDir, 0, "test"); err != nil {
				t.Fatal(err)
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if rc.resource["service.name"] != "apodex" {
				t.Errorf("service.name %q without OTEL_SERVICE_NAME", rc.resource["service.name"])
			}
			if !rc.metrics["gen_ai.client.token.usage"] || !rc.metrics["gen_ai.client.operation.duration"] {
				t.Errorf("metrics received: %v", rc.metrics)
			}
			var ok, retries int
			for _, sp := range rc.spans {
				if str(sp, "gen_ai.operation.name") != "chat" {
					continue
				}
				if str(sp, "error.type") == "429" {
					retries++
					continue
				}
				ok++
				host, _, _ := strings.Cut(strings.TrimPrefix(ep.URL, "http://"), ":")
				if str(sp, "server.address") != host || num(sp, "server.port") <= 0 || !boolean(sp, "gen_ai.request.stream", false) ||
					!strings.HasPrefix(str(sp, "gen_ai.response.id"), "chatcmpl-") || num(sp, "gen_ai.usage.cache_read.input_tokens") != 32 {
					t.Errorf("chat span attributes %v", sp.Attributes)
				}
				if in := str(sp, "gen_ai.input.messages"); !strings.Contains(in, "finish at once") || strings.Contains(in, `"role":"system"`) {
					t.Errorf("gen_ai.input.messages %.200s", in)
				}
				if str(sp, "gen_ai.system_instructions") == "" || !strings.Contains(str(sp, "gen_ai.output.messages"), `"tool_call"`) {
					t.Errorf("system instructions or output messages missing")
				}
			}
			if ok != 1 || retries != 1 {
				t.Errorf("%d chat spans and %d retry spans, want 1 and 1", ok, retries)
			}
		})
	}
}

func TestOffByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if otel.Enabled() {
		t.Error("enabled without an endpoint")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if otel.Enabled() {
		t.Error("enabled with OTEL_SDK_DISABLED=true")
	}
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func str(s *tracepb.Span, key string) string { return attr(s.Attributes, key) }

func num(s *tracepb.Span, key string) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetIntValue()
		}
	}
	return -1
}

func boolean(s *tracepb.Span, key string, want bool) bool {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetBoolValue() == want
		}
	}
	return false
}
