package otel_test

import (
	"context"
	"github.com/apodex/apodex/internal/runtest"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/scripted"
	"github.com/apodex/apodex/internal/otel"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// receiver is an in-process OTLP/HTTP trace endpoint: it decodes what it
// is sent and keeps the spans.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	posts int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf at /v1/traces", http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.posts++
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
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
		ModelInfo: record.ModelSettings{Provider: "scripted", Name: "script-1"}, Retry: llm.RetryPolicy{MaxAttempts: 1},
		Mode: run.ModeTeam, InputsDir: "../../examples/team-csv/inputs", Sandbox: sandbox,
	})
	if err != nil || s.Status != run.StatusCompleted {
		t.Fatalf("team run: %v %s", err, s.Status)
	}
	return s.RunDir
}

func TestExportFollowsTheGenAIConventions(t *testing.T) {
	dir := teamRun(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
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
	var wantIn, wantOut, responses, results int
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
		}
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	agents := map[string]*tracepb.Span{}
	var chats, execs []*tracepb.Span
	for _, s := range rc.spans {
		byID[string(s.SpanId)] = s
		switch str(s, "gen_ai.operation.name") {
		case "invoke_agent":
			agents[str(s, "gen_ai.agent.name")] = s
		case "chat":
			chats = append(chats, s)
		case "execute_tool":
			execs = append(execs, s)
		}
	}
	for _, a := range []string{"lead", "A1", "A2", "A3", "V1", "V2"} {
		s := agents[a]
		if s == nil {
			t.Errorf("no invoke_agent span for %s", a)
			continue
		}
		if s.Name != "invoke_agent "+a || s.EndTimeUnixNano < s.StartTimeUnixNano {
			t.Errorf("agent span %q %d→%d", s.Name, s.StartTimeUnixNano, s.EndTimeUnixNano)
		}
		if (a == "lead") != (len(s.ParentSpanId) == 0) {
			t.Errorf("%s: parent %x; the lead is the root, the others its children", a, s.ParentSpanId)
		}
	}
	if len(chats) != responses || len(execs) != results {
		t.Fatalf("%d chat and %d execute_tool spans; the record has %d model responses and %d tool results", len(chats), len(execs), responses, results)
	}
	var in, out int64
	for _, s := range chats {
		in += num(s, "gen_ai.usage.input_tokens")
		out += num(s, "gen_ai.usage.output_tokens")
		if str(s, "gen_ai.request.model") != "script-1" || s.Name != "chat script-1" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("chat span %q model %q kind %v", s.Name, str(s, "gen_ai.request.model"), s.Kind)
		}
		if p := byID[string(s.ParentSpanId)]; p == nil || str(p, "gen_ai.operation.name") != "invoke_agent" {
			t.Errorf("chat span %q is not a child of an agent span", s.Name)
		}
	}
	if in != int64(wantIn) || out != int64(wantOut) || in == 0 {
		t.Errorf("tokens in %d out %d, the record says %d and %d", in, out, wantIn, wantOut)
	}
	got := map[string]int{}
	for _, s := range execs {
		got[str(s, "gen_ai.tool.name")]++
		if s.TraceId == nil || string(s.TraceId) != string(agents["lead"].TraceId) {
			t.Errorf("tool span %q in another trace", s.Name)
		}
	}
	for name, n := range tools {
		if got[name] != n {
			t.Errorf("execute_tool %s: %d spans, %d results", name, got[name], n)
		}
	}
}

func TestOffByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if otel.Enabled() {
		t.Error("enabled without an endpoint")
	}
}

func str(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func num(s *tracepb.Span, key string) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetIntValue()
		}
	}
	return -1
}
