package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/llm/llmtest"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
)

// cli runs the CLI in-process, as a user would from a shell.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// cliIn is cli with in as standard input.
func cliIn(t *testing.T, in string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(cmdline.WithStdin(context.Background(), strings.NewReader(in)), args, &out, &errb)
	return code, out.String(), errb.String()
}

// openaiArgs are the flags that point a run at srv.
func openaiArgs(home string, srv *llmtest.Server) []string {
	return []string{"run", "--home", home, "--provider", "openai", "--base-url", srv.URL, "--model", "m"}
}

// call builds a tool call whose arguments are args as JSON.
func call(name string, args map[string]any) llm.ToolCall {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as a model would write them
	if err := enc.Encode(args); err != nil {
		panic(err)
	}
	return llm.ToolCall{Name: name, Arguments: strings.TrimSuffix(b.String(), "\n")}
}

func bash(command string) llm.ToolCall { return call("bash", map[string]any{"command": command}) }

func finish(summary string) llm.ToolCall {
	return call("finish", map[string]any{"summary": summary})
}

func calls(cs ...llm.ToolCall) llmtest.Turn { return llmtest.Turn{Calls: cs} }

// decodeSummary reads the --json object of `apodex run`.
func decodeSummary(t *testing.T, stdout string) run.Summary {
	t.Helper()
	var s run.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("--json output is not a summary object: %v\n%s", err, stdout)
	}
	return s
}

// onlyRun returns the directory of the single run under home.
func onlyRun(t *testing.T, home string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(home, "runs", "*"))
	if len(dirs) != 1 {
		t.Fatalf("want one run under %s, found %v", home, dirs)
	}
	return dirs[0]
}

// decodeAll decodes the payloads of the events of type typ.
func decodeAll[T any](t *testing.T, evs []record.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if e.Type == typ {
			var v T
			if err := e.Decode(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

// toolReplies are the tool messages at the end of a request: the
// observations of the previous turn, as the model read them.
func toolReplies(req llmtest.Request) []llmtest.Message {
	i := len(req.Messages)
	for i > 0 && req.Messages[i-1].Role == "tool" {
		i--
	}
	return req.Messages[i:]
}

var exitCodeRE = regexp.MustCompile(`exit code: (-?\d+)`)

// exitCode reads "exit code: N" from a bash observation; -1000 if absent.
func exitCode(obs string) int {
	m := exitCodeRE.FindStringSubmatch(obs)
	if m == nil {
		return -1000
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// oneLineMessage asserts that a configuration error is one line mentioning
// every hint.
func oneLineMessage(t *testing.T, stderr string, hints ...string) {
	t.Helper()
	msg := strings.TrimRight(stderr, "\n")
	if msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("want a one-line message on stderr, got:\n%s", stderr)
	}
	for _, h := range hints {
		if !strings.Contains(msg, h) {
			t.Errorf("message %q does not mention %q", msg, h)
		}
	}
}

// noCrashText asserts that output has no Go runtime noise.
func noCrashText(t *testing.T, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		for _, bad := range []string{"goroutine ", "panic", "runtime error"} {
			if strings.Contains(o, bad) {
				t.Errorf("output contains %q:\n%s", bad, o)
			}
		}
	}
}

func fileContent(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists on the host", path)
	}
}

func jsonValid(s string) bool { return json.Valid([]byte(s)) }
