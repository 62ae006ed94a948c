package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/runtest"
)

// Problems with the model endpoint end the run with exit 1 and a message
// naming what to fix; they never show Go internals, and the record is closed.
func TestEndpointFailures(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String() + "/v1"
		ln.Close()
		home := t.TempDir()
		code, out, errOut := cli(t, "run", "--home", home, "--provider", "openai", "--base-url", base, "--model", "m", "--retries", "2", "objective")
		if code != 1 || !strings.Contains(errOut, base) || !strings.Contains(errOut, "--base-url") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
		noCrashText(t, out, errOut)
		evs := runtest.Events(t, onlyRun(t, home))
		if n := len(decodeAll[record.ModelRetry](t, evs, record.TypeModelRetry)); n != 1 {
			t.Errorf("%d model_retry events with --retries 2, want 1", n)
		}
		rf := decodeAll[record.RunFinished](t, evs, record.TypeRunFinished)
		if len(rf) != 1 || rf[0].Termination != "model_error" || rf[0].Status != "stopped" {
			t.Errorf("run_finished %+v", rf)
		}
	})

	t.Run("401", func(t *testing.T) {
		srv := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Status: 401}))
		home := t.TempDir()
		code, out, errOut := cli(t, append(openaiArgs(home, srv), "--retries", "3", "objective")...)
		if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "API key") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
		noCrashText(t, out, errOut)
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("a 401 was tried %d times; it is not worth retrying", n)
		}
	})

	t.Run("429 then success", func(t *testing.T) {
		srv := llmtest.NewOpenAI(t, llmtest.Script(llmtest.Turn{Status: 429, RetryAfter: "0"}))
		home := t.TempDir()
		code, out, errOut := cli(t, append(openaiArgs(home, srv), "--retries", "3", "--quiet", "objective")...)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		if errOut != "" {
			t.Errorf("--quiet run wrote to stderr:\n%s", errOut)
		}
		evs := runtest.Events(t, onlyRun(t, home))
		retries := decodeAll[record.ModelRetry](t, evs, record.TypeModelRetry)
		if len(retries) != 1 || retries[0].Attempt != 1 || !strings.Contains(retries[0].Error, "429") {
			t.Errorf("model_retry events %+v", retries)
		}
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})

	t.Run("model never answers", func(t *testing.T) {
		srv := llmtest.NewOpenAI(t, func(int, llmtest.Request) llmtest.Turn { return llmtest.Turn{Hang: true} })
		home := t.TempDir()
		code, out, errOut := cli(t, append(openaiArgs(home, srv), "--timeout", "1s", "--json", "objective")...)
		if code != 1 {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
		noCrashText(t, out, errOut)
		s := decodeSummary(t, out)
		if s.Termination != "hard_timeout" || s.Status != "failed" {
			t.Errorf("summary %+v", s)
		}
		evs := runtest.Events(t, s.RunDir)
		if evs[len(evs)-1].Type != record.TypeRunFinished {
			t.Errorf("the record does not end with run_finished")
		}
	})
}

// A command that never ends is killed at its timeout and the run goes on.
func TestCommandTimeoutIsAnObservation(t *testing.T) {
	runtest.NeedSandbox(t)
	srv := llmtest.NewOpenAI(t, llmtest.Script(
		calls(call("bash", map[string]any{"command": "echo started; sleep 1000", "timeout_s": 1})),
		calls(finish("gave up on sleeping")),
	))
	home := t.TempDir()
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "objective")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	o := toolReplies(reqs[1])[0].Content
	if !strings.Contains(o, "timed out after 1s") || !strings.Contains(o, "started") {
		t.Errorf("observation %q", o)
	}
	for _, r := range decodeAll[record.ToolResult](t, runtest.Events(t, onlyRun(t, home)), record.TypeToolResult) {
		if r.Name == "bash" && (r.Meta == nil || !r.Meta.TimedOut) {
			t.Errorf("tool_result meta %v, want timed_out", r.Meta)
		}
	}
}

// A command printing about a gigabyte: the sandbox keeps the first 8 MiB,
// the model reads a small cut that states the real size, the run goes on.
func TestGigabyteFlood(t *testing.T) {
	runtest.NeedSandbox(t)
	srv := llmtest.NewOpenAI(t, llmtest.Script(calls(bash("yes | head -c 1000000000"))))
	home := t.TempDir()
	code, out, errOut := cli(t, append(openaiArgs(home, srv), "--quiet", "objective")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	o := toolReplies(srv.Requests()[1])[0].Content
	statesSize := regexp.MustCompile(`\b(953(\.\d+)? MiB|1000000000|1(\.0+)? ?GB)\b`).MatchString(o)
	if len(o) > 32<<10 || !statesSize || !strings.Contains(o, "bytes cut of") {
		t.Errorf("the model read %d bytes:\n%.500s", len(o), o)
	}
	for _, r := range decodeAll[record.ToolResult](t, runtest.Events(t, onlyRun(t, home)), record.TypeToolResult) {
		if r.Name == "bash" && (r.FullRef == "" || r.FullBytes < 8<<20 || r.FullBytes > 8<<20+1024 || r.Meta == nil || r.Meta.StdoutBytes != 1_000_000_000) {
			t.Errorf("tool_result full_bytes %d meta %v", r.FullBytes, r.Meta)
		}
	}
}

// Usage and configuration errors: exit 2, one line saying what to do, and
// nothing created.
func TestConfigurationErrors(t *testing.T) {
	srv := llmtest.NewOpenAI(t, func(n int, _ llmtest.Request) llmtest.Turn {
		t.Errorf("the model was called (request %d) although the configuration is bad", n)
		return llmtest.Turn{}
	})
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  func(home string) []string
		hints []string
	}{
		{"missing inputs", func(home string) []string {
			return append(openaiArgs(home, srv), "--inputs", filepath.Join(home, "nope"), "objective")
		}, []string{"does not exist", "--inputs"}},
		{"inputs is a file", func(home string) []string {
			return append(openaiArgs(home, srv), "--inputs", file, "objective")
		}, []string{"--inputs"}},
		{"unwritable home", func(string) []string {
			return append(openaiArgs(filepath.Join(file, "sub"), srv), "objective")
		}, []string{"--home", "writable"}},
		{"no objective", func(home string) []string { return openaiArgs(home, srv) }, []string{"objective"}},
		{"negative budget", func(home string) []string {
			return append(openaiArgs(home, srv), "--max-turns", "-1", "objective")
		}, []string{"budgets"}},
		{"bad sandbox", func(home string) []string {
			return append(openaiArgs(home, srv), "--sandbox", "docker", "objective")
		}, []string{"auto, bwrap, native or none"}},
		{"unknown provider", func(home string) []string {
			return []string{"run", "--home", home, "--provider", "gemini", "objective"}
		}, []string{"openai, anthropic or scripted"}},
		{"scripted without script", func(home string) []string {
			return []string{"run", "--home", home, "--provider", "scripted", "objective"}
		}, []string{"--script"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			code, _, errOut := cli(t, tt.args(home)...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			oneLineMessage(t, errOut, tt.hints...)
			noCrashText(t, errOut)
			if _, err := os.Stat(filepath.Join(home, "runs")); err == nil {
				t.Errorf("a run directory was created")
			}
		})
	}

	t.Run("bad flag", func(t *testing.T) {
		code, _, errOut := cli(t, "run", "--home", t.TempDir(), "--no-such-flag", "objective")
		if code != 2 || !strings.Contains(errOut, "no-such-flag") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})

	t.Run("no provider configured", func(t *testing.T) {
		for _, k := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "APODEX_MODEL"} {
			t.Setenv(k, "")
		}
		home := t.TempDir()
		code, _, errOut := cli(t, "run", "--home", home, "objective")
		if code != 2 {
			t.Errorf("exit %d, want 2", code)
		}
		oneLineMessage(t, errOut, "--provider")
	})
}
