package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/runtest"
)

func TestServeRefusesAnOpenAddressWithoutAToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		code, _, stderr := cli(t, "serve", "--home", t.TempDir(), "--addr", addr)
		if code != cmdline.ExitUsage || !strings.Contains(stderr, "--token") {
			t.Errorf("serve --addr %s: exit %d, %q", addr, code, stderr)
		}
	}
}

// serveCLI starts apodex serve on a free loopback port and returns its URL
// (as printed) and a stop.
func serveCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- Run(ctx, append([]string{"serve"}, args...), out, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != cmdline.ExitOK {
			t.Errorf("serve exited %d", code)
		}
	})
	for i := 0; i < 500; i++ {
		if s := out.String(); strings.Contains(s, "http://") {
			f := strings.Fields(s[strings.Index(s, "http://"):])
			return f[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("serve printed no URL: %q", out.String())
	return ""
}

func TestServeListsRunsAndGeneratesAToken(t *testing.T) {
	runtest.NeedSandbox(t) // the team demo's script expects the sandbox's outputs
	home := t.TempDir()
	if code, _, stderr := cli(t, "run", "--home", home, "--provider", "scripted", "--script", "../../examples/team-csv/script.json",
		"--mode", "team", "--inputs", "../../examples/team-csv/inputs", "--quiet", "Sum north and south and report"); code != cmdline.ExitOK {
		t.Fatalf("team demo: exit %d %s", code, stderr)
	}
	url := serveCLI(t, "--home", home, "--addr", "127.0.0.1:0")
	base, key, ok := strings.Cut(url, "?token=")
	if !ok || len(key) < 20 {
		t.Fatalf("URL %q carries no control key", url)
	}
	resp, err := http.Get(base + "api/runs")
	if err != nil {
		t.Fatal(err)
	}
	var runs []struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&runs)
	resp.Body.Close()
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	// Reading needs no key on loopback; a control does (a sandboxed curl
	// under --network host reaches loopback, but never saw the URL).
	control := func(bearer string) int {
		req, _ := http.NewRequest("POST", base+"api/runs/"+runs[0].ID+"/control", strings.NewReader(`{"action":"cancel"}`))
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := control(""); code != http.StatusUnauthorized {
		t.Errorf("a control without the key: %d, want 401", code)
	}
	if code := control(key); code != http.StatusConflict { // admitted; the run has finished
		t.Errorf("a control with the key: %d, want 409 (the run finished)", code)
	}

	url = serveCLI(t, "--home", home, "--addr", "127.0.0.1:0", "--token", "generate")
	base, token, ok := strings.Cut(url, "?token=")
	if !ok || len(token) < 20 {
		t.Fatalf("URL %q carries no generated token", url)
	}
	resp, _ = http.Get(base + "api/runs")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+"api/runs", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the token: %d", resp.StatusCode)
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, apodex run exports its spans with
// the GenAI token usage.
func TestRunExportsSpans(t *testing.T) {
	runtest.NeedSandbox(t)
	var mu sync.Mutex
	usage := map[string]int64{}
	names := map[string]int{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad protobuf", 400)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[strings.Fields(s.Name)[0]]++
					for _, kv := range s.Attributes {
						if strings.HasPrefix(kv.Key, "gen_ai.usage.") {
							usage[kv.Key] += kv.Value.GetIntValue()
						}
					}
				}
			}
		}
		mu.Unlock()
	}))
	defer rc.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	code, stdout, stderr := cli(t, "run", "--home", t.TempDir(), "--provider", "scripted", "--script", "../../examples/team-csv/script.json",
		"--mode", "team", "--inputs", "../../examples/team-csv/inputs", "--json", "Sum north and south and report")
	if code != cmdline.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := decodeSummary(t, stdout)
	mu.Lock()
	defer mu.Unlock()
	if names["invoke_agent"] < 4 || names["chat"] == 0 || names["execute_tool"] == 0 {
		t.Errorf("span names %v", names)
	}
	if usage["gen_ai.usage.input_tokens"] != int64(s.Usage.PromptTokens) || usage["gen_ai.usage.output_tokens"] != int64(s.Usage.CompletionTokens) || s.Usage.PromptTokens == 0 {
		t.Errorf("exported usage %v, the run's %+v", usage, s.Usage)
	}
}
